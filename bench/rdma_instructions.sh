#!/usr/bin/env bash
# User-space instructions and calls per 64-byte round trip of the RDMA stream ping-pong
# (docs/perf.md, RDMA data path, stop 26): callgrind over one rmsg-perf process, client and
# server on one loop (`--one-thread`, so a round trip is two messages, both ends), events
# mode (`--poll-spin 0`: no spin, whose length depends on timing, is counted), at two
# iteration counts; the difference over the extra round trips is the cost of one. Under
# qemu TCG a call and its return cost about as much as 20 plain instructions, so the calls
# are counted too (every call arc callgrind saw, by the callee's object). Run it in the guest:
#   tests/softroce/run --timeout 900 -- bench/rdma_instructions.sh [--perf PATH] [--iters A,B]
#                                                                  [--keep DIR] [--top N] [--busy]
# --top N: the N functions whose own (self) cost per round trip is largest, with their calls.
# --busy: busy-poll mode instead; its count includes the empty poll passes while a message
# is on its way, which depend on timing (the poller's calls per round trip say how many).
set -euo pipefail

perf=build/bin/rmsg-perf
iters_a=500
iters_b=1500
keep=""
top=0
mode=(--poll-spin 0)
while [[ $# -gt 0 ]]; do
  case "$1" in
    --perf) perf="$2"; shift 2 ;;
    --iters) iters_a="${2%,*}"; iters_b="${2#*,}"; shift 2 ;;
    --keep) keep="$2"; shift 2 ;;
    --top) top="$2"; shift 2 ;;
    --busy) mode=(--busy-poll); shift ;;
    *) echo "usage: $0 [--perf PATH] [--iters A,B] [--keep DIR] [--top N] [--busy]" >&2; exit 2 ;;
  esac
done
: "${RMSG_RDMA_ADDR:?run this inside the Soft-RoCE guest (tests/softroce/run)}"
[[ -x "$perf" ]] || { echo "$0: no $perf" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "$0: valgrind not installed" >&2; exit 2; }
out="${keep:-$(mktemp -d)}"
mkdir -p "$out"
[[ -n "$keep" ]] || trap 'rm -rf "$out"' EXIT

run() {  # $1 iters: leaves $out/rdma.$1
  valgrind --tool=callgrind --callgrind-out-file="$out/rdma.$1" \
    "$perf" --transport rdma --baseline none --test lat --size 64 --one-thread --repeat 1 \
    "${mode[@]}" --iters "$1" >/dev/null 2>"$out/valgrind.$1.log"
}
run "$iters_a"
run "$iters_b"
# rmsg-perf runs a tenth of --iters more as warmup.
extra=$(( (iters_b + iters_b / 10) - (iters_a + iters_a / 10) ))
python3 - "$out/rdma.$iters_a" "$out/rdma.$iters_b" "$extra" "$top" <<'EOF'
import collections, re, sys

def load(path):
    """Total Ir; self Ir, calls received and object by function."""
    names = {"ob": {}, "fn": {}}
    def name(kind, text):  # compressed names: "(id) name" once, "(id)" after
        m = re.match(r"\((\d+)\)(?: (.*))?", text)
        if not m:
            return text
        table = names[kind]
        if m.group(2) is not None:
            table[m.group(1)] = m.group(2)
        return table.get(m.group(1), m.group(1))
    total = 0
    self_ir = collections.Counter()
    calls_in = collections.Counter()
    fn_ob = {}
    ob = fn = cob = cfn = None
    pending_call = None
    for line in open(path):
        line = line.rstrip("\n")
        if line.startswith(("summary:", "totals:")):
            total = int(line.split()[1])
            continue
        key, _, value = line.partition("=")
        if key == "ob":
            ob = name("ob", value)
        elif key == "fn":
            fn = name("fn", value)
            fn_ob[fn] = ob
        elif key == "cob":
            cob = name("ob", value)
        elif key == "cfn":
            cfn = name("fn", value)
            fn_ob.setdefault(cfn, cob or ob)
        elif key == "calls":
            pending_call = int(value.split()[0])
        elif line and (line[0].isdigit() or line[0] in "+-*"):
            if pending_call is not None:  # the call's inclusive cost: not the caller's own
                calls_in[cfn] += pending_call
                pending_call = None
                cob = None
            else:
                parts = line.split()
                self_ir[fn] += int(parts[1]) if len(parts) > 1 else 0
    return total, self_ir, calls_in, fn_ob

a, b = load(sys.argv[1]), load(sys.argv[2])
extra, top = int(sys.argv[3]), int(sys.argv[4])
ir = (b[0] - a[0]) / extra
calls = {k: (b[2][k] - a[2].get(k, 0)) / extra for k in b[2]}
by_ob = collections.Counter()
for k, v in calls.items():
    by_ob[(b[3].get(k) or "?").rsplit("/", 1)[-1]] += v
print(f"{extra} extra round trips: {ir:.0f} instructions, {sum(calls.values()):.1f} calls per round trip")
for k, v in by_ob.most_common():
    if v >= 0.5:
        print(f"    calls into {k:40s} {v:8.1f}")
if top > 0:
    per = sorted(((b[1][k] - a[1].get(k, 0)) / extra, k) for k in b[1])
    print(f"top {top} by self instructions per round trip (calls per round trip):")
    for v, k in reversed(per[-top:]):
        print(f"{v:9.0f} {calls.get(k, 0):7.1f}  {k[:140]}")
EOF
