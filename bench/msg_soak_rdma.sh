#!/bin/sh
# The messenger's longer RDMA soak: msg_rdma_tests' soak case with more messages (each way)
# and connections killed at random points; it prints the seed, the time, the kills, the
# replays and checks 0 lost, 0 doubled, 0 out of order. Run it in the guest:
#   tests/softroce/run --timeout 900 -- bench/msg_soak_rdma.sh [BUILD_DIR] [MESSAGES] [SECONDS]
# (defaults: build, 200000, 600). RMSG_TEST_SEED=<n> replays a run. Numbers: docs/messenger.md.
set -eu
build=${1:-build}
export RMSG_MSG_SOAK_MESSAGES=${2:-200000}
export RMSG_MSG_SOAK_SECONDS=${3:-600}
: "${RMSG_RDMA_ADDR:?run this inside the Soft-RoCE guest (tests/softroce/run)}"
exec "$build/bin/msg_rdma_tests" --gtest_filter='MessengerRdmaTest.Soak*'
