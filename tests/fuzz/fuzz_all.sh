#!/bin/bash
# `make fuzz`: runs each messenger libFuzzer target (tests/fuzz/msg_fuzzers.cmake) for SECONDS
# with a fixed seed: a fresh scratch corpus first (new inputs go there), the committed corpus
# second (read only), artifacts (crash-*, timeout-*) in BUILD/fuzz/NAME/. Fails on the first
# target that finds a crash, leak or broken property.
#   fuzz_all.sh BUILD_DIR SECONDS        (RMSG_FUZZ_SEED overrides the seed, 1)
set -euo pipefail
build=$1 seconds=$2
src=$(cd "$(dirname "$0")" && pwd)
seed=${RMSG_FUZZ_SEED:-1}
cfg=$src/msg_fuzzers.cmake
names=$(sed -n 's/^set(RMSG_MSG_FUZZERS \(.*\))$/\1/p' "$cfg")
max_len=$(sed -n 's/^set(RMSG_MSG_FUZZ_MAX_LEN \([0-9]*\))$/\1/p' "$cfg")
[ -n "$names" ] && [ -n "$max_len" ] || { echo "fuzz: cannot read $cfg" >&2; exit 1; }
for name in $names; do
  work=$build/fuzz/$name
  rm -rf "$work/scratch"
  mkdir -p "$work/scratch"
  echo "fuzz: $name for ${seconds}s, seed $seed, artifacts in $work/"
  "$build/bin/${name}_fuzzer" -seed="$seed" -max_total_time="$seconds" -max_len="$max_len" \
    -print_final_stats=1 -artifact_prefix="$work/" "$work/scratch" "$src/corpus/$name" \
    2>"$work/log" || { tail -40 "$work/log"; echo "fuzz: $name FAILED (log $work/log)"; exit 1; }
  grep -E '^(stat::number_of_executed_units|stat::new_units_added)|cov:' "$work/log" | tail -3
done
echo "fuzz: 0 crashes"
