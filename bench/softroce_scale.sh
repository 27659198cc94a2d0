#!/bin/sh
# Many connections on one loop thread (rmsg-perf --test scale, docs/perf.md "Many
# connections"): RDMA at growing counts, with and without the per-iteration setup budget,
# then TCP beside it. Both ends live in one process, so the guest needs about
# 2 x connections x the rings (1 MiB each end at the default geometry) of memory.
# Run it in the guest:
#   RMSG_SOFTROCE_MEM=4G tests/softroce/run --timeout 3000 -- bench/softroce_scale.sh [BUILD_DIR] [COUNTS]
# Numbers under emulation are indicative only (docs/perf.md).
set -u
build=${1:-build}
counts=${2:-"200 500 1000"}
: "${RMSG_RDMA_ADDR:?run this inside the Soft-RoCE guest (tests/softroce/run)}"
ulimit -n 1048576 2>/dev/null || ulimit -n 65536
perf="$build/bin/rmsg-perf --test scale --json"
for n in $counts; do
  echo "== rdma, $n connections, setup budget off (every request accepted at once)"
  $perf --transport rdma --connections "$n" --setup-calls 0
  echo "== rdma, $n connections, default setup budget"
  $perf --transport rdma --connections "$n"
  echo "== rdma, $n connections, shared receive (4 KiB pool blocks, 8 x 4 KiB send ring)"
  $perf --transport rdma --connections "$n" --shared-receive --blocks 8x4K
  echo "== tcp, $n connections"
  $perf --transport tcp --connections "$n"
done
