#!/bin/sh
# 64 KiB streaming in the Soft-RoCE guest while the host has less CPU to give it: a busy
# loop per LOAD runs on the host for the whole run, as other tenants would on a shared
# machine (docs/perf.md, "A busy host core", stop 28). Alternating rounds against raw
# verbs, medians of 5: the stream's two loop threads as the scheduler places them, both
# ends on one loop thread, every thread of both ends on one vCPU, and the two ends pinned
# to two vCPUs.
# Run it on the host (it starts the guest itself):
#   bench/softroce_contended.sh [BUILD_DIR] [LOAD]
# BUILD_DIR: relative to the repository (default build). LOAD: busy loops on the host
# (default 1; 0 measures the same rows without them).
# Numbers under emulation are indicative only.
set -eu
build=${1:-build}
load=${2:-1}
cd "$(dirname "$0")/.."

hogs=""
# shellcheck disable=SC2086 # $hogs is a list of pids
stop_hogs() { [ -z "$hogs" ] || kill $hogs 2>/dev/null || true; }
trap stop_hogs EXIT
trap 'exit 130' INT TERM
i=0
while [ "$i" -lt "$load" ]; do
  sh -c 'while :; do :; done' &
  hogs="$hogs $!"
  i=$((i + 1))
done
echo "== host: $(nproc) CPUs, $load busy loop(s) beside the guest"

perf="$build/bin/rmsg-perf --transport rdma --test bw --size 64K --iters 800 --repeat 5"
tests/softroce/run --timeout 900 -- sh -c "
  echo '== two loop threads, the scheduler places them'; $perf
  echo '== one loop thread for both ends (--one-thread)'; $perf --one-thread
  echo '== both ends pinned to CPU 0 (--cpus 0,0)'; $perf --cpus 0,0
  echo '== client on the last CPU, server on CPU 0'; $perf --cpus \$((\$(nproc) - 1)),0
"
