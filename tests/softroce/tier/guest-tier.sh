#!/bin/bash
# Runs inside the guest: every case of every RDMA test binary in the manifest. Per case it
# leaves NAME/CASE.{rc,log,xml} in the results folder for the host's reporter.
#   guest-tier.sh MANIFEST RESULTS
# Manifest lines: NAME|BINARY|TIMEOUT_SECONDS|ISOLATED_FILTER. Exit status: 0 when every
# binary could be listed and run (failing cases are reported by their own CTest tests), 1
# otherwise.
#
# A process start costs 0.5-1.5 s in the guest (TCG), most of what the tier spent beyond
# the cases themselves. So each binary first runs all its cases but the ISOLATED ones in
# ONE process (under TIMEOUT x 3), and its gtest XML and output are split per case. Only
# when that process exits 0 (every case passed, no sanitizer report at exit) do those
# results stand; otherwise every one of its cases runs again in its own process under its
# own TIMEOUT, exactly as a per-case tier would (so a crash, a hang or a leak costs one
# case and is pinned on it). ISOLATED cases always run in their own process.
set -euo pipefail
manifest=$1
results=$2

# gtest --gtest_list_tests: "Suite." lines, then "  Case" lines; parameterised ones carry
# a "  # GetParam() = ..." comment.
list_cases() {
  "$1" --gtest_list_tests ${2:+--gtest_filter="$2"} | awk '
    /^[^ ]/ { suite = $1 }
    /^  [^ ]/ { print suite $1 }'
}

# Every fork costs ~0.4 s in a loaded guest: per case only builtins (a case's file name is
# "Prefix/Suite.Case/0" -> "Prefix_Suite.Case_0", as report-case makes it; times from
# EPOCHREALTIME), and one awk per batch.

broken=0 passed=0 failed=0

report() {  # NAME CASE RC MS [NOTE]
  if [ "$3" = 0 ]; then
    passed=$((passed + 1))
    printf 'PASS   %-60s %6d ms%s\n' "$1.$2" "$4" "${5:-}"
  else
    failed=$((failed + 1))
    printf 'FAIL   %-60s %6d ms  (exit status %s)\n' "$1.$2" "$4" "$3"
  fi
}

run_alone() {  # NAME BINARY TIMEOUT CASE
  local key=${4//\//_} start=${EPOCHREALTIME/./} rc=0 ms
  timeout -k 5 "$3" "$2" --gtest_filter="$4" \
    --gtest_output="xml:$results/$1/$key.xml" >"$results/$1/$key.log" 2>&1 || rc=$?
  ms=$(((${EPOCHREALTIME/./} - start) / 1000))
  if [ "$rc" = 124 ]; then
    echo "TIMEOUT: the case ran past ${3}s and was killed" >>"$results/$1/$key.log"
  fi
  echo "$rc" >"$results/$1/$key.rc"
  report "$1" "$4" "$rc" "$ms"
}

# Splits the batch's XML and output into NAME/CASE.{xml,log,rc} (rc 0: the batch passed);
# prints the cases it wrote, with the case's own time in ms, as "CASE MS".
split_batch() {  # NAME
  local dir=$results/$1
  awk -v dir="$dir" '
    function attr(line, a,   m) {
      if (match(line, " " a "=\"[^\"]*\"")) {
        m = substr(line, RSTART + length(a) + 3, RLENGTH - length(a) - 4)
        return m
      }
      return ""
    }
    /<testcase / {
      full = attr($0, "classname") "." attr($0, "name")
      key = full; gsub("/", "_", key)
      file = dir "/" key ".xml"
      printf "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites>\n" > file
      ms = int(attr($0, "time") * 1000)
      open_case = ($0 !~ /\/>[ \t]*$/)
      print $0 > file
      if (!open_case) { printf "</testsuites>\n" > file; close(file); print full, ms }
      next
    }
    open_case {
      print $0 > file
      if ($0 ~ /<\/testcase>/) {
        open_case = 0; printf "</testsuites>\n" > file; close(file); print full, ms
      }
    }' "$dir/batch.xml"
  awk -v dir="$dir" '
    /^\[ RUN      \] / { full = $4; key = full; gsub("/", "_", key); file = dir "/" key ".log" }
    file != "" { print $0 > file }
    /^\[       OK \] |^\[  FAILED  \] |^\[  SKIPPED \] / { if (file != "" && $4 == full) { close(file); file = "" } }
  ' "$dir/batch.log"
}

while IFS='|' read -r name binary case_timeout isolated; do
  [ -n "$name" ] || continue
  mkdir -p "$results/$name"
  if ! cases=$(list_cases "$binary" 2>"$results/$name/list.err"); then
    echo "ERROR $name: cannot list its cases: $(head -c 500 "$results/$name/list.err")"
    broken=1
    continue
  fi
  alone=""
  [ -z "$isolated" ] || alone=$(list_cases "$binary" "$isolated" 2>>"$results/$name/list.err")
  alone_words=" ${alone//$'\n'/ } "
  batch=""
  for c in $cases; do
    case "$alone_words" in *" $c "*) ;; *) batch="$batch $c" ;; esac
  done
  if [ -n "$batch" ]; then
    start=${EPOCHREALTIME/./}
    rc=0
    timeout -k 5 $((case_timeout * 3)) "$binary" ${isolated:+--gtest_filter="-$isolated"} \
      --gtest_output="xml:$results/$name/batch.xml" >"$results/$name/batch.log" 2>&1 || rc=$?
    ms=$(((${EPOCHREALTIME/./} - start) / 1000))
    if [ "$rc" = 0 ] && [ -f "$results/$name/batch.xml" ]; then
      declare -A case_ms=()
      # A file, not < <(...): the guest has no /dev/fd.
      split_batch "$name" >"$results/$name/batch.split"
      while read -r c c_ms; do case_ms[$c]=$c_ms; done <"$results/$name/batch.split"
      n=0
      for c in $batch; do
        n=$((n + 1))
        if [ -n "${case_ms[$c]:-}" ]; then
          echo 0 >"$results/$name/${c//\//_}.rc"
          report "$name" "$c" 0 "${case_ms[$c]}" "  (one process)"
        else
          run_alone "$name" "$binary" "$case_timeout" "$c"
        fi
      done
      unset case_ms
      echo "batch  $name: $n cases in one process, $ms ms"
    else
      echo "batch  $name: exit status $rc after $ms ms; every case again in its own process"
      for c in $batch; do run_alone "$name" "$binary" "$case_timeout" "$c"; done
    fi
  fi
  for c in $alone; do run_alone "$name" "$binary" "$case_timeout" "$c"; done
done <"$manifest"
echo "rdma tier: $passed cases passed, $failed failed$([ $broken = 1 ] && echo ', some binaries could not run')"
exit "$broken"
