#!/bin/bash
# Runs inside the guest: every case of every RDMA test binary in the manifest, each case
# in its own process under its own timeout, so that a hang or a crash costs one case.
# Per case it leaves NAME/CASE.{rc,log,xml} in the results folder for the host's reporter.
#   guest-tier.sh MANIFEST RESULTS
# Manifest lines: NAME|BINARY|TIMEOUT_SECONDS. Exit status: 0 when every binary could be
# listed and run (failing cases are reported by their own CTest tests), 1 otherwise.
set -euo pipefail
manifest=$1
results=$2

# gtest --gtest_list_tests: "Suite." lines, then "  Case" lines; parameterised ones carry
# a "  # GetParam() = ..." comment.
list_cases() {
  "$1" --gtest_list_tests | awk '
    /^[^ ]/ { suite = $1 }
    /^  [^ ]/ { print suite $1 }'
}

# "Prefix/Suite.Case/0" -> "Prefix_Suite.Case_0": a file name (report-case does the same).
case_key() { echo "${1//\//_}"; }

broken=0 passed=0 failed=0
while IFS='|' read -r name binary case_timeout; do
  [ -n "$name" ] || continue
  mkdir -p "$results/$name"
  if ! cases=$(list_cases "$binary" 2>"$results/$name/list.err"); then
    echo "ERROR $name: cannot list its cases: $(head -c 500 "$results/$name/list.err")"
    broken=1
    continue
  fi
  for c in $cases; do
    key=$(case_key "$c")
    start=$(date +%s%N)
    rc=0
    timeout -k 5 "$case_timeout" "$binary" --gtest_filter="$c" \
      --gtest_output="xml:$results/$name/$key.xml" >"$results/$name/$key.log" 2>&1 || rc=$?
    ms=$((($(date +%s%N) - start) / 1000000))
    if [ "$rc" = 124 ]; then
      echo "TIMEOUT: the case ran past ${case_timeout}s and was killed" >>"$results/$name/$key.log"
    fi
    echo "$rc" >"$results/$name/$key.rc"
    if [ "$rc" = 0 ]; then
      passed=$((passed + 1))
      printf 'PASS   %-60s %6d ms\n' "$name.$c" "$ms"
    else
      failed=$((failed + 1))
      printf 'FAIL   %-60s %6d ms  (exit status %s)\n' "$name.$c" "$ms" "$rc"
    fi
  done
done <"$manifest"
echo "rdma tier: $passed cases passed, $failed failed$([ $broken = 1 ] && echo ', some binaries could not run')"
exit "$broken"
