#!/bin/bash
# The socket shim's RDMA upgrade against its baselines across two Soft-RoCE guests, one
# run (docs/perf.md, "Socket shim upgrade"). Not in make test. Run it in both guests:
#   tests/softroce/run --two-host --timeout 900 -- bench/shim_upgrade.sh $PWD/build
# In order, each on its own connection:
#   64 B ping-pong: rmsg-perf's RDMA stream against the kernel's TCP (its posix baseline,
#     alternating rounds); then bench/shim_pingpong_2host.c through the C API with the
#     upgrade engine (on RDMA after a 4 s warm-up; its RMSG_STATS line says so) and
#     through the C library's calls (the kernel's TCP): median, p99, CPU per round trip
#   bandwidth: rmsg-perf's stream against the kernel's TCP (64 KiB writes); iperf3 with
#     both ends under rmsg-run (RDMA after the cut-over) and plain (the kernel's TCP):
#     the median and lowest one-second interval after the first 4 s, and the client's
#     CPU time (bash's `time`: user + system) per GB sent
# Numbers under emulation (TCG, 2 host cores shared) are indicative only.
set -uo pipefail
build=${1:?BUILD_DIR}
role=${RMSG_RDMA_ROLE:?run by tests/softroce/run --two-host}
peer=${RMSG_RDMA_PEER_ADDR:?}
me=${RMSG_RDMA_ADDR:?}
perf="$build/bin/rmsg-perf --transport rdma --baseline posix"
pp="$build/bin/shim_pingpong_2host"
run="$build/bin/rmsg-run"
dir=$(mktemp -d)
secs=${RMSG_BENCH_IPERF_SECONDS:-10}
TIMEFORMAT='%U %S'

if [ "$role" = server ]; then
  $perf --server "$me:18515" > /dev/null 2>&1 &
  perf_server=$!
  RMSG_UPGRADE=on RMSG_STATS=$dir/capi.jsonl $pp capi server "$me" 5401 ||
    echo "shim_pingpong_2host capi server failed"
  sed 's/^/server capi stats: /' "$dir/capi.jsonl"
  $pp libc server "$me" 5402 || echo "shim_pingpong_2host libc server failed"
  RMSG_UPGRADE=on timeout 120 "$run" --stats "$dir/iperf3.jsonl" iperf3 -s -1 -B "$me" -p 5403 \
    > /dev/null 2>&1 || echo "iperf3 server (rmsg-run) failed"
  sed 's/^/server iperf3 stats: /' "$dir/iperf3.jsonl"
  timeout 120 iperf3 -s -1 -B "$me" -p 5404 > /dev/null 2>&1 || echo "iperf3 server failed"
  kill "$perf_server"
  wait "$perf_server" 2>/dev/null
  rm -rf "$dir"
  exit 0
fi

# Until the server guest's rmsg-perf answers (bounded).
for _ in $(seq 600); do
  $perf --connect "$peer:18515" --test lat --size 64 --iters 200 --repeat 1 > /dev/null 2>&1 && break
  sleep 0.2
done
echo "== 64 B ping-pong, one-way us: rmsg-perf RDMA stream vs kernel TCP (posix baseline)"
$perf --connect "$peer:18515" --test lat --size 64 --iters 1000 --repeat 3 --json 2> /dev/null
echo "== 64 B ping-pong through the shim: ROUND MEDIAN_US P99_US CPU_US_PER_ROUND_TRIP"
RMSG_UPGRADE=on RMSG_STATS=$dir/capi.jsonl $pp capi client "$peer" 5401 4000 3 1000 ||
  echo "shim_pingpong_2host capi client failed"
sed 's/^/client capi stats: /' "$dir/capi.jsonl"
$pp libc client "$peer" 5402 1000 3 1000 || echo "shim_pingpong_2host libc client failed"

echo "== bandwidth, 64 KiB writes: rmsg-perf RDMA stream vs kernel TCP (posix baseline)"
$perf --connect "$peer:18515" --test bw --size 64K --iters 500 --repeat 3 --json 2> /dev/null

# iperf3 -J's one-second intervals after the first 4 s (the cut-over): median and lowest.
iperf_rates() {
  /usr/bin/python3 -c 'import json,statistics,sys
d=json.load(open(sys.argv[1])); r=[i["sum"]["bits_per_second"]/1e6 for i in d["intervals"]][4:]
e=d["end"]["sum_sent"]["bytes"]
cpu=sum(float(x) for x in open(sys.argv[2]).read().split()[-2:])
print("%s: Mbit/s after 4 s median %.1f, lowest %.1f (%d intervals); %d bytes sent; client CPU %.2f s = %.1f s/GB" % (
  sys.argv[3], statistics.median(r), min(r), len(r), e, cpu, cpu / (e / 1e9)))' "$@"
}
for i in $(seq 600); do  # retried until the server guest listens
  { time RMSG_UPGRADE=on "$run" --stats "$dir/iperf3.jsonl" iperf3 -J -c "$peer" -p 5403 \
      -t "$secs" > "$dir/rdma.json" 2> /dev/null; } 2> "$dir/rdma.time"
  grep -q '"error":' "$dir/rdma.json" || break
  rm -f "$dir/iperf3.jsonl"
  sleep 0.2
done
echo "== iperf3 -t $secs"
iperf_rates "$dir/rdma.json" "$dir/rdma.time" "iperf3 both under rmsg-run (RDMA)"
sed 's/^/client iperf3 stats: /' "$dir/iperf3.jsonl"
for i in $(seq 600); do
  { time iperf3 -J -c "$peer" -p 5404 -t "$secs" > "$dir/tcp.json" 2> /dev/null; } 2> "$dir/tcp.time"
  grep -q '"error":' "$dir/tcp.json" || break
  sleep 0.2
done
iperf_rates "$dir/tcp.json" "$dir/tcp.time" "iperf3 plain (kernel TCP)"
rm -rf "$dir"
