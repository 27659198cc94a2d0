#!/usr/bin/env bash
# User-space instructions per round trip of the RPC depth-1 row against the raw Stream
# ping-pong (docs/perf.md, Messenger RPC, stops 23-24): callgrind over one rmsg-perf process
# (`--test rpc --transport tcp --outstanding 1`), dumped at the phase boundaries, at two
# iteration counts; the difference over the extra round trips is the cost of one (set-up
# and tear-down cancel out). Instruction counts do not move with the host's load, so two
# builds can be compared on a busy machine.
#
#   bench/rpc_instructions.sh [--build-dir DIR | --perf PATH] [--size N] [--iters A,B]
#                             [--keep DIR] [--top N]
#
# Prints the ping-pong's and the RPC's instructions per round trip; with --top N also the
# N functions whose inclusive cost per round trip grew most between the two runs of the
# RPC phase (callgrind_annotate --inclusive=yes on each dump, subtracted). --keep leaves
# the callgrind files there (rpc.<A|B>.<pid>.<part>; part 2 is the RPC phase).
set -euo pipefail

build=build
perf=""
size=64
iters_a=1000
iters_b=4000
keep=""
top=0
while [[ $# -gt 0 ]]; do
  case "$1" in
    --build-dir) build="$2"; shift 2 ;;
    --perf) perf="$2"; shift 2 ;;
    --size) size="$2"; shift 2 ;;
    --iters) iters_a="${2%,*}"; iters_b="${2#*,}"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    --top) top="$2"; shift 2 ;;
    *) echo "usage: $0 [--build-dir DIR | --perf PATH] [--size N] [--iters A,B] [--keep DIR] [--top N]" >&2
       exit 2 ;;
  esac
done
[[ -n "$perf" ]] || perf="$build/bin/rmsg-perf"
[[ -x "$perf" ]] || { echo "$0: no $perf" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "$0: valgrind not installed" >&2; exit 2; }
out="${keep:-$(mktemp -d)}"
mkdir -p "$out"
[[ -n "$keep" ]] || trap 'rm -rf "$out"' EXIT

run() {  # $1 iters: leaves $out/rpc.$1.<pid>.{1,2,3}
  valgrind --tool=callgrind --callgrind-out-file="$out/rpc.$1.%p" \
    --dump-after='rmsg::perf::stream_ping_pong*' --dump-before='rmsg::perf::stream_streaming*' \
    "$perf" --test rpc --transport tcp --size "$size" --outstanding 1 --iters "$1" \
    >/dev/null 2>"$out/valgrind.$1.log"
}
total() {  # the Ir of one dump
  awk '/^(summary|totals):/ {print $2; exit}' "$1"
}
part() {  # $1 iters, $2 part
  ls "$out"/rpc."$1".*."$2" | head -1
}

run "$iters_a"
run "$iters_b"
# rmsg-perf runs a tenth of --iters more as warmup.
extra=$(( (iters_b + iters_b / 10) - (iters_a + iters_a / 10) ))
pp=$(( ($(total "$(part "$iters_b" 1)") - $(total "$(part "$iters_a" 1)")) / extra ))
rpc=$(( ($(total "$(part "$iters_b" 2)") - $(total "$(part "$iters_a" 2)")) / extra ))
echo "size $size, $extra extra round trips: stream ping-pong $pp, rpc depth 1 $rpc instructions per round trip ($(awk -v a="$rpc" -v b="$pp" 'BEGIN {printf "%.2f", a / b}')x)"

if [[ "$top" -gt 0 ]]; then
  for n in "$iters_a" "$iters_b"; do
    callgrind_annotate --inclusive=yes --threshold=100 --auto=no --show-percs=no \
      "$(part "$n" 2)" >"$out/inclusive.$n.txt"
  done
  python3 - "$out/inclusive.$iters_a.txt" "$out/inclusive.$iters_b.txt" "$extra" "$top" <<'EOF'
import re, sys
def load(path):
    costs = {}
    for line in open(path):
        m = re.match(r"^\s*([\d,]+)\s+(?:\(\s*[\d.]+%\)\s+)?(\S.*)$", line)
        if m and ":" in m.group(2):
            name = m.group(2).split(":", 1)[1].strip()
            costs[name] = costs.get(name, 0) + int(m.group(1).replace(",", ""))
    return costs
a, b = load(sys.argv[1]), load(sys.argv[2])
extra, top = int(sys.argv[3]), int(sys.argv[4])
diff = sorted(((b.get(k, 0) - a.get(k, 0)) / extra, k) for k in b)
for per, name in reversed(diff[-top:]):
    print(f"{per:9.0f}  {name[:150]}")
EOF
fi
