#!/bin/sh
# A/B of two rmsg-perf binaries on the 64-byte busy-poll ping-pong, run alternately in one
# Soft-RoCE guest (docs/perf.md, RDMA data path, stop 26). Each run prints its stream
# median one-way latency and, against raw verbs (two threads, the measurement),
# that run's verbs median, ratio and gap; with --one-thread both ends run on one loop and
# there is no baseline (the host's speed states still show, but within a state the runs
# are steady enough to compare builds). Keep a copy of the other build's binary somewhere
# the guest sees (its build folder, or tests/softroce/run --share DIR):
#   tests/softroce/run --share DIR -- bench/softroce_busy_ab.sh [--one-thread] PAIRS ITERS A B
set -eu
one=""
if [ "${1:-}" = "--one-thread" ]; then
  one="--one-thread --baseline none"
  shift
fi
pairs=${1:?pairs} iters=${2:?iters} a=${3:?binary A} b=${4:?binary B}
i=0
while [ $i -lt "$pairs" ]; do
  for bin in "$a" "$b"; do
    # shellcheck disable=SC2086  # $one is two options or none
    "$bin" --transport rdma --test lat --size 64 --busy-poll $one --iters "$iters" --json 2>/dev/null |
      awk -v bin="$bin" -v pair=$i '
        /"transport":"verbs"/ { match($0, /"median_us":[0-9.]+/); v = substr($0, RSTART + 12, RLENGTH - 12) }
        /"transport":"rdma"/ { match($0, /"median_us":[0-9.]+/); s = substr($0, RSTART + 12, RLENGTH - 12) }
        END {
          if (s == "") { print "pair " pair " " bin " FAILED"; exit }
          printf "pair %d %s stream %.2f", pair, bin, s
          if (v > 0) printf " verbs %.2f ratio %.3f gap %.2f", v, s / v, s - v
          printf "\n"
        }'
  done
  i=$((i + 1))
done
