#!/bin/sh
# The RDMA stream against its baselines in one Soft-RoCE guest, one run: rmsg-perf's
# stream vs raw verbs (alternating rounds, medians of 5), in each completion mode, then
# the raw-verbs variant with the stream's window, then both with their threads pinned
# (split over two vCPUs, then all on one), then rsockets' rstream (rdmacm-utils)
# with its default spin and with the stream's spin budget, and both as two processes.
# Run it in the guest:
#   tests/softroce/run --timeout 900 -- bench/softroce_baselines.sh [BUILD_DIR]
# Numbers under emulation are indicative only (docs/perf.md).
set -eu
build=${1:-build}
addr=${RMSG_RDMA_ADDR:?run this inside the Soft-RoCE guest (tests/softroce/run)}
perf="$build/bin/rmsg-perf --transport rdma"
spin_us=50 # EventLoopOptions::poll_spin's default

echo "== 64 B ping-pong: adaptive polling (default), events only, busy-poll"
$perf --test lat --size 64 --iters 2000 --repeat 5
$perf --test lat --size 64 --iters 2000 --repeat 5 --poll-spin 0
$perf --test lat --size 64 --iters 2000 --repeat 5 --busy-poll
echo "== streaming: against raw verbs, then raw verbs with the stream's window"
$perf --test bw --size 64,4K,64K --iters 1000 --repeat 5
$perf --test bw --size 4K,64K --iters 1000 --repeat 5 --baseline verbs-window
# Both ends' threads pinned, the stream's and the baseline's alike (docs/perf.md, "Thread
# placement"): the client on the last CPU, the servers on the first.
cpus=$(nproc)
if [ "$cpus" -ge 2 ]; then
  echo "== streaming, client thread on CPU $((cpus - 1)), server threads on CPU 0"
  $perf --test bw --size 4K,64K --iters 1000 --repeat 5 --cpus $((cpus - 1)),0
fi
# Every thread of both ends on one vCPU: no cross-vCPU hand-offs (docs/perf.md, "A busy
# host core"); the baseline's threads share it too.
echo "== 64 KiB streaming, every thread on CPU 0"
$perf --test bw --size 64K --iters 1000 --repeat 5 --cpus 0,0

# rmsg-perf as two processes: a server (stream on PORT, verbs baseline on PORT+1).
port=18515
$perf --server "$addr:$port" 2>/dev/null &
server=$!
tries=0
until $perf --connect "$addr:$port" --test lat --size 64 --iters 2000 --repeat 5 2>/dev/null; do
  tries=$((tries + 1))
  [ "$tries" -lt 20 ] || { kill "$server"; echo "rmsg-perf: no server" >&2; exit 1; }
  sleep 0.5
done
kill -INT "$server"
wait "$server" || true

# rstream: ping-pong of SIZE bytes, 2000 transfers; its columns: name bytes xfers iters
# total time Gb/sec usec/xfer. Its client does not retry, so it is restarted until the
# server listens. POLL: rsockets' polling_time in microseconds ("" keeps its default).
rstream_run() {
  size=$1
  poll=$2
  if [ -n "$poll" ]; then
    mkdir -p /etc/rdma/rsocket
    echo "$poll" >/etc/rdma/rsocket/polling_time
  else
    rm -f /etc/rdma/rsocket/polling_time
  fi
  rstream -b "$addr" -S "$size" -C 2000 >/dev/null &
  rs=$!
  tries=0
  until out=$(rstream -s "$addr" -S "$size" -C 2000 2>/dev/null); do
    tries=$((tries + 1))
    [ "$tries" -lt 50 ] || { kill "$rs"; echo "rstream: no server" >&2; exit 1; }
  done
  wait "$rs"
  echo "rstream $size B (polling_time ${poll:-default}): $(echo "$out" | tail -n 1)"
}
for round in 1 2 3; do
  rstream_run 64 ""
  rstream_run 64 "$spin_us"
done
rstream_run 65536 ""
rm -f /etc/rdma/rsocket/polling_time
