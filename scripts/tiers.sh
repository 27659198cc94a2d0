#!/bin/bash
# Runs `make test-<step>` for each step in order, stopping at the first that fails, and
# always ends with each step's wall time (also on failure or interrupt), so CI's log shows
# where the time went and which tier broke. Exits with the failed step's status.
#   MAKE=make scripts/tiers.sh build host asan ...   (the Makefile's `test` calls it)
set -uo pipefail
make=${MAKE:-make}
steps=("$@")
declare -A took=()
failed="" current="" status=0 step_start=0 start_all=$(date +%s)

report() {
  local step line
  echo
  echo "make test: wall time per tier"
  for step in "${steps[@]}"; do
    if [ -n "${took[$step]+set}" ]; then
      line="${took[$step]} s"
    elif [ "$step" = "$current" ]; then
      line="interrupted after $(($(date +%s) - step_start)) s"
    else
      line="not run"
    fi
    [ "$step" = "$failed" ] && line="$line  FAILED (status $status)"
    printf '  %-10s %s\n' "$step" "$line"
  done
  printf '  %-10s %s s\n' total "$(($(date +%s) - start_all))"
  if [ -n "$failed" ]; then
    echo "make test: tier '$failed' failed"
  fi
}
trap report EXIT
trap 'exit 130' INT TERM

for step in "${steps[@]}"; do
  current=$step step_start=$(date +%s)
  target=test-$step
  [ "$step" = build ] && target=build
  "$make" --no-print-directory "$target"
  status=$?
  took[$step]=$(($(date +%s) - step_start))
  current=""
  if [ "$status" -ne 0 ]; then
    failed=$step
    exit "$status"
  fi
done
