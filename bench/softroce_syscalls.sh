#!/bin/sh
# System calls per 64-byte round trip of the RDMA stream and of the raw-verbs baseline,
# counted with `strace -c -f` in the Soft-RoCE guest. Client and server are one process
# (rmsg-perf in-process), so a round trip's count covers both ends: two messages. Each
# case runs twice (N and 2N round trips) and reports the difference / N, which cancels
# setup and teardown. Run it in the guest:
#   tests/softroce/run --timeout 900 -- bench/softroce_syscalls.sh [BUILD_DIR] [N]
set -eu
build=${1:-build}
n=${2:-1000}
: "${RMSG_RDMA_ADDR:?run this inside the Soft-RoCE guest (tests/softroce/run)}"
perf="$build/bin/rmsg-perf --test lat --size 64 --repeat 1"
out=${TMPDIR:-/tmp}/softroce_syscalls.$$

calls() {  # the "total" line's calls column of strace -c
  strace -c -f -S calls -o "$out" "$@" >/dev/null 2>&1
  awk '$NF == "total" { print $4 }' "$out"
}

# case LABEL ARGS...: the per-round-trip count, then the top system calls of the 2N run.
case_() {
  label=$1
  shift
  a=$(calls $perf --iters "$n" "$@")
  b=$(calls $perf --iters $((2 * n)) "$@")
  echo "syscalls $label: $(awk -v a="$a" -v b="$b" -v n="$n" 'BEGIN { printf "%.2f", (b - a) / n }') per round trip ($a in $n, $b in $((2 * n)))"
  awk 'NR > 2 && $NF != "total" && $1 !~ /^-/ { printf "    %-18s %s\n", $NF, $4 }' "$out" | head -n 8
}

case_ "rdma default" --transport rdma --baseline none
case_ "rdma poll-spin 0" --transport rdma --baseline none --poll-spin 0
case_ "rdma busy-poll" --transport rdma --baseline none --busy-poll
case_ "verbs default" --transport verbs
case_ "verbs busy-poll" --transport verbs --busy-poll
rm -f "$out"
