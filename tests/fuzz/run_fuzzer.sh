#!/bin/bash
# Runs one libFuzzer target for a bounded number of inputs (CTest fuzz.NAME), seeded from
# RMSG_TEST_SEED like every random test (printed; a fresh one when unset). New inputs go to
# a corpus folder in the build tree; the committed seeds in tests/fuzz/corpus/NAME are read only.
#   run_fuzzer.sh FUZZER WORK_DIR SEED_CORPUS RUNS [MAX_LEN (128)]
set -euo pipefail
fuzzer=$1 work=$2 seeds=$3 runs=$4 max_len=${5:-128}
seed=${RMSG_TEST_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
seed=$((seed % 4294967296))
echo "RMSG_TEST_SEED=$seed"
mkdir -p "$work/corpus" "$work/crashes"
exec "$fuzzer" -seed="$seed" -runs="$runs" -max_len="$max_len" -artifact_prefix="$work/crashes/" \
  "$work/corpus" "$seeds"
