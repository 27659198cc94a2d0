#!/bin/bash
# Real programs across two Soft-RoCE guests with the shim's upgrade on (run by
# tests/softroce/run --two-host, which runs this in both guests: RMSG_RDMA_ROLE server at
# RMSG_RDMA_ADDR 10.0.0.1, client at 10.0.0.2). Each case runs a server program on the
# server guest and its client on the client guest; each guest checks its own RMSG_STATS
# lines. Cases, in order (ports 5301...):
#   iperf3            both ends under rmsg-run: every connection on RDMA (fallback null),
#                     the data connection's bytes over RDMA
#   iperf3 -R         the same, the server sending
#   iperf3 -Z         the client sends with sendfile(): carried on the upgraded connection
#   asyncio           asyncio_echo.py, both ends under rmsg-run: 8 MiB echoed, every byte
#                     checked by the client, on RDMA
#   iperf3 plain      the server plain: the client's connections stay TCP, reason `peer`
#   asyncio plain     the client plain: the server's connection stays TCP, reason `peer`
#   upgrade_two_host.sh BUILD_DIR
set -uo pipefail
build=$1
here=$(cd "$(dirname "$0")" && pwd)
role=${RMSG_RDMA_ROLE:?run by tests/softroce/run --two-host}
peer=${RMSG_RDMA_PEER_ADDR:?}
me=${RMSG_RDMA_ADDR:?}
run="$build/bin/rmsg-run"
py=/usr/bin/python3
dir=$(mktemp -d)
export RMSG_UPGRADE=on
failed=0
secs=${RMSG_TWO_HOST_IPERF_SECONDS:-6}

fail() { echo "upgrade_two_host ($role): $*" >&2; failed=1; }

# check NAME STATS TRANSPORT FALLBACK MIN_RDMA_BYTES: the busiest connection (most bytes
# in and out; iperf3's data connection) has that transport and fallback and moved at least
# MIN_RDMA_BYTES over RDMA; with fallback "peer" every connection says so.
check() {
  local name=$1 stats=$2 transport=$3 fallback=$4 min=$5
  [ -s "$stats" ] || { fail "$name: no stats lines"; return; }
  sed "s/^/  $role $name: /" "$stats"
  local busiest
  busiest=$(awk -F'"bytes_in":|,"bytes_out":|,"rdma_bytes_in"' '{print $2 + $3, NR}' "$stats" |
            sort -n | tail -n 1 | cut -d' ' -f2)
  local line
  line=$(sed -n "${busiest}p" "$stats")
  case "$line" in *"\"transport\":\"$transport\""*) ;; *) fail "$name: not on $transport";; esac
  case "$line" in *"\"fallback\":$fallback"*) ;; *) fail "$name: fallback not $fallback";; esac
  if [ "$fallback" = '"peer"' ] && grep -v '"fallback":"peer"' "$stats"; then
    fail "$name: a connection to a plain peer with another reason"
  fi
  local rdma
  rdma=$(echo "$line" | sed -n 's/.*"rdma_bytes_in":\([0-9]*\),"rdma_bytes_out":\([0-9]*\).*/\1 \2/p')
  [ $((${rdma% *} + ${rdma#* })) -ge "$min" ] || fail "$name: $rdma bytes over RDMA, expected $min"
}

# The client's side of iperf3: retried until the server guest listens (bounded).
iperf_client() {
  local out=$1; shift
  local deadline=$((SECONDS + 60))
  while :; do
    "$@" > "$out" 2>&1 && return 0
    grep -q "unable to connect\|Connection refused" "$out" || { cat "$out"; return 1; }
    [ $SECONDS -lt $deadline ] || { cat "$out"; return 1; }
    sleep 0.2  # the server guest may not listen yet
  done
}

iperf_case() {  # NAME PORT SERVER_PREFIX CLIENT_PREFIX CLIENT_ARGS...
  local name=$1 port=$2 sp=$3 cp=$4; shift 4
  local stats=$dir/$name.jsonl
  if [ "$role" = server ]; then
    [ "$sp" = shim ] && pre=("$run" --stats "$stats") || pre=()
    timeout 60 "${pre[@]}" iperf3 --forceflush -s -1 -B "$me" -p "$port" > "$dir/$name.out" 2>&1 ||
      { cat "$dir/$name.out"; fail "$name: iperf3 server failed"; }
  else
    [ "$cp" = shim ] && pre=("$run" --stats "$stats") || pre=()
    iperf_client "$dir/$name.out" timeout 60 "${pre[@]}" iperf3 --forceflush -c "$peer" -p "$port" -t "$secs" "$@" ||
      fail "$name: iperf3 client failed"
    grep -E "sender|receiver" "$dir/$name.out" | sed "s/^/  $name: /"
  fi
}

asyncio_case() {  # NAME PORT SERVER_PREFIX CLIENT_PREFIX
  local name=$1 port=$2 sp=$3 cp=$4
  local stats=$dir/$name.jsonl
  if [ "$role" = server ]; then
    [ "$sp" = shim ] && pre=("$run" --stats "$stats") || pre=()
    timeout 60 "${pre[@]}" $py "$here/asyncio_echo.py" server "$me" "$port" ||
      fail "$name: asyncio server failed"
  else
    [ "$cp" = shim ] && pre=("$run" --stats "$stats") || pre=()
    timeout 60 "${pre[@]}" $py "$here/asyncio_echo.py" client "$peer" "$port" $((8 << 20)) ||
      fail "$name: asyncio client failed"
  fi
}

# RMSG_TWO_HOST_CASES: the cases to run (names as above, space-separated); all by default.
want() { [ -z "${RMSG_TWO_HOST_CASES:-}" ] || [[ " $RMSG_TWO_HOST_CASES " == *" $1 "* ]]; }

if want iperf3; then
  iperf_case iperf3 5301 shim shim
  check iperf3 "$dir/iperf3.jsonl" rdma null $((1 << 20))
fi
if want iperf3_R; then
  iperf_case iperf3_R 5302 shim shim -R
  check iperf3_R "$dir/iperf3_R.jsonl" rdma null $((1 << 20))
fi
if want iperf3_Z; then
  iperf_case iperf3_Z 5303 shim shim -Z
  check iperf3_Z "$dir/iperf3_Z.jsonl" rdma null $((1 << 20))
fi
if want asyncio; then
  asyncio_case asyncio 5304 shim shim
  check asyncio "$dir/asyncio.jsonl" rdma null $((1 << 20))
fi
if want iperf3_plain; then
  iperf_case iperf3_plain 5305 plain shim
  [ "$role" = server ] || check iperf3_plain "$dir/iperf3_plain.jsonl" tcp '"peer"' 0
fi
if want asyncio_plain; then
  asyncio_case asyncio_plain 5306 shim plain
  [ "$role" = client ] || check asyncio_plain "$dir/asyncio_plain.jsonl" tcp '"peer"' 0
fi

rm -rf "$dir"
[ $failed -eq 0 ] && echo "upgrade_two_host ($role): every case passed"
exit $failed
