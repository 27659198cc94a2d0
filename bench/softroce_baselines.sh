#!/bin/sh
# The RDMA stream against its baselines in one Soft-RoCE guest, one run: rmsg-perf's
# stream vs raw verbs (alternating rounds, medians), then rsockets' rstream (rdmacm-utils)
# at the same sizes. Run it in the guest:
#   tests/softroce/run --timeout 900 -- bench/softroce_baselines.sh [BUILD_DIR]
# Numbers under emulation are indicative only (docs/perf.md).
set -eu
build=${1:-build}
addr=${RMSG_RDMA_ADDR:?run this inside the Soft-RoCE guest (tests/softroce/run)}
perf="$build/bin/rmsg-perf --transport rdma"

$perf --test lat --size 64 --iters 2000 --repeat 5
$perf --test bw --size 4K,16K,64K --iters 1000 --repeat 5

# rstream: ping-pong of SIZE bytes, 2000 transfers, its default (blocking, short poll);
# its columns: name bytes xfers iters total time Gb/sec usec/xfer.
# Its client does not retry, so it is restarted until the server listens.
for size in 64 65536; do
  rstream -b "$addr" -S "$size" -C 2000 >/dev/null &
  server=$!
  tries=0
  until out=$(rstream -s "$addr" -S "$size" -C 2000 2>/dev/null); do
    tries=$((tries + 1))
    [ "$tries" -lt 50 ] || { kill "$server"; echo "rstream: no server" >&2; exit 1; }
  done
  wait "$server"
  echo "rstream $size B: $(echo "$out" | tail -n 1)"
done
