#!/bin/bash
# Real programs across two Soft-RoCE guests with the shim's upgrade on (run by
# tests/softroce/run --two-host, which runs this in both guests: RMSG_RDMA_ROLE server at
# RMSG_RDMA_ADDR 10.0.0.1, client at 10.0.0.2; ctest posix.upgrade_two_host). Each case
# runs a server program on the server guest and its client on the client guest; each
# guest checks its own RMSG_STATS lines. Cases, in order (ports 5301...):
#   iperf3            both ends under rmsg-run: every connection upgraded (fallback null),
#                     more than 1 MiB of the data connection's bytes over RDMA
#   iperf3_R          the same, the server sending
#   iperf3_Z          the client sends with sendfile() (-Z, 32 MiB): carried on the upgraded
#                     connection; every byte the server received (its -F file) is zero, as
#                     iperf3 3.12 sends them (upgrade_two_host_bytes.py)
# iperf3's bytes are checked with -Z only: 3.12's -F sender, after a partial write, reads
# the file's next piece over the unsent rest of its buffer (plain too: every partial
# write corrupts its stream); the asyncio pair checks every byte both ways.
#   asyncio           asyncio_echo.py, both ends under rmsg-run: 8 MiB echoed, every byte
#                     checked by the client, more than 1 MiB over RDMA each way; the
#                     client's guest drops all its packets for 1.5 s once upgraded
#                     (stall_link): the connection must survive as TCP would
#   iperf3_plain      the server plain: the client's connections stay TCP, reason `peer`
#   asyncio_plain     the client plain: the server's connection stays TCP, reason `peer`
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
secs=${RMSG_TWO_HOST_IPERF_SECONDS:-5}

fail() { echo "upgrade_two_host ($role): $*" >&2; failed=1; }

field() {  # LINE KEY: the JSON value (numbers, null, quoted strings as they are)
  echo "$1" | sed -n "s/.*\"$2\":\([^,}]*\).*/\1/p"
}

# check NAME STATS FALLBACK MIN_IN MIN_OUT: every connection has that fallback (null:
# upgraded, with transport rdma for the busiest); the busiest (most bytes; iperf3's data
# connection) moved at least MIN_IN and MIN_OUT bytes over RDMA.
check() {
  local name=$1 stats=$2 fallback=$3 min_in=$4 min_out=$5
  [ -s "$stats" ] || { fail "$name: no stats lines"; return; }
  sed "s/^/  $role $name: /" "$stats"
  if grep -v "\"fallback\":$fallback" "$stats" > /dev/null; then
    fail "$name: a connection without fallback $fallback"
  fi
  local busiest=0 line= l
  while read -r l; do
    local n=$(($(field "$l" bytes_in) + $(field "$l" bytes_out)))
    [ "$n" -ge "$busiest" ] && { busiest=$n; line=$l; }
  done < "$stats"
  local transport=tcp
  [ "$fallback" = null ] && transport=rdma
  [ "$(field "$line" transport)" = "\"$transport\"" ] || fail "$name: last byte not on $transport"
  [ "$(field "$line" rdma_bytes_in)" -ge "$min_in" ] || fail "$name: rdma_bytes_in under $min_in"
  [ "$(field "$line" rdma_bytes_out)" -ge "$min_out" ] || fail "$name: rdma_bytes_out under $min_out"
  busiest_line=$line
}

# check_bytes NAME zeros: the receiver's -F file, every byte.
check_bytes() {
  $py "$here/upgrade_two_host_bytes.py" check "$dir/$1.received" "$2" $((16 << 20)) |
    sed "s/^/  $role $1: /" || fail "$1: bytes received differ"
}

# The client's side of iperf3: retried until the server guest listens (bounded; the
# guests boot at their own pace). With -J, iperf3 may exit 0 after an error: its JSON says.
iperf_client() {
  local out=$1; shift
  local deadline=$((SECONDS + 120))
  while :; do
    "$@" > "$out" 2> "$out.err" && ! grep -q '"error":' "$out" && return 0
    grep -q "unable to connect\|Connection refused" "$out" || { cat "$out" "$out.err"; return 1; }
    [ $SECONDS -lt $deadline ] || { cat "$out" "$out.err"; return 1; }
    sleep 0.2  # the server guest may not listen yet
  done
}

iperf_case() {  # NAME PORT SERVER_PREFIX CLIENT_PREFIX SERVER_ARGS CLIENT_ARGS
  local name=$1 port=$2 sp=$3 cp=$4 sargs=$5 cargs=$6
  local stats=$dir/$name.jsonl pre=()
  if [ "$role" = server ]; then
    [ "$sp" = shim ] && pre=("$run" --stats "$stats")
    # shellcheck disable=SC2086  # the arguments are words
    timeout 150 "${pre[@]}" iperf3 -J -s -1 -B "$me" -p "$port" $sargs > "$dir/$name.json" \
      2> "$dir/$name.err" || { cat "$dir/$name.json" "$dir/$name.err"; fail "$name: iperf3 server failed"; }
  else
    [ "$cp" = shim ] && pre=("$run" --stats "$stats")
    # shellcheck disable=SC2086
    iperf_client "$dir/$name.json" timeout 60 "${pre[@]}" iperf3 -J -c "$peer" -p "$port" $cargs ||
      fail "$name: iperf3 client failed"
    $py -c 'import json,sys; e=json.load(open(sys.argv[1]))["end"]
print("  %s: sent %d, received %d bytes, %.1f Mbit/s" % (sys.argv[2], e["sum_sent"]["bytes"],
      e["sum_received"]["bytes"], e["sum_received"]["bits_per_second"] / 1e6))' \
      "$dir/$name.json" "$name" || { cat "$dir/$name.json"; fail "$name: no iperf3 result"; }
  fi
}

asyncio_case() {  # NAME PORT SERVER_PREFIX CLIENT_PREFIX
  local name=$1 port=$2 sp=$3 cp=$4
  local stats=$dir/$name.jsonl pre=()
  if [ "$role" = server ]; then
    [ "$sp" = shim ] && pre=("$run" --stats "$stats")
    timeout 150 "${pre[@]}" $py "$here/asyncio_echo.py" server "$me" "$port" 2> "$dir/$name.err" ||
      { tail -5 "$dir/$name.err"; fail "$name: asyncio server failed"; }
  else
    [ "$cp" = shim ] && pre=("$run" --stats "$stats")
    timeout 60 "${pre[@]}" $py "$here/asyncio_echo.py" client "$peer" "$port" $((8 << 20)) \
      2> "$dir/$name.err" &
    local pid=$!
    [ "$cp" = shim ] && [ "$sp" = shim ] && stall_link $pid
    wait $pid || { tail -5 "$dir/$name.err"; fail "$name: asyncio client failed"; }
  fi
}

# stall_link PID: once PID's connection is on RDMA (a connected RC QP), this guest drops
# every packet it sends for 1.5 s: no ACK, no data, no keepalive either way. A TCP
# connection rides out such a stall, so an upgraded one must too (the RC transport's
# retries have to outlast it: a starved guest pair stalls like this).
stall_link() {
  local pid=$1 deadline=$((SECONDS + 60))
  while kill -0 "$pid" 2> /dev/null && [ $SECONDS -lt $deadline ]; do
    if rdma resource show qp 2> /dev/null | grep -q "type RC state RTS"; then
      tc qdisc add dev eth0 root netem loss 100% || { fail "stall: no netem"; return; }
      sleep 1.5  # the stall itself, not a wait for an event
      tc qdisc del dev eth0 root
      echo "  $role: link stalled for 1.5 s"
      return
    fi
    sleep 0.05
  done
  fail "stall: the connection never reached RDMA"
}

# RMSG_TWO_HOST_CASES: the cases to run (names as above, space-separated); all by default.
want() { [ -z "${RMSG_TWO_HOST_CASES:-}" ] || [[ " $RMSG_TWO_HOST_CASES " == *" $1 "* ]]; }
mib=$((1 << 20))
busiest_line=

if want iperf3; then
  iperf_case iperf3 5301 shim shim "" "-t $secs"
  if [ "$role" = server ]; then
    check iperf3 "$dir/iperf3.jsonl" null $mib 0
  else
    check iperf3 "$dir/iperf3.jsonl" null 0 $mib
  fi
fi
if want iperf3_R; then
  iperf_case iperf3_R 5302 shim shim "" "-R -t $secs"
  if [ "$role" = server ]; then
    check iperf3_R "$dir/iperf3_R.jsonl" null 0 $mib
  else
    check iperf3_R "$dir/iperf3_R.jsonl" null $mib 0
  fi
fi
if want iperf3_Z; then
  iperf_case iperf3_Z 5303 shim shim "-F $dir/iperf3_Z.received" "-Z -n 24M"
  if [ "$role" = server ]; then
    check iperf3_Z "$dir/iperf3_Z.jsonl" null $mib 0 && check_bytes iperf3_Z zeros
  else
    check iperf3_Z "$dir/iperf3_Z.jsonl" null 0 $mib
  fi
fi
if want asyncio; then
  asyncio_case asyncio 5304 shim shim
  check asyncio "$dir/asyncio.jsonl" null $mib $mib
fi
if want iperf3_plain; then
  iperf_case iperf3_plain 5305 plain shim "" "-t 3"
  [ "$role" = server ] || check iperf3_plain "$dir/iperf3_plain.jsonl" '"peer"' 0 0
fi
if want asyncio_plain; then
  asyncio_case asyncio_plain 5306 shim plain
  [ "$role" = client ] || check asyncio_plain "$dir/asyncio_plain.jsonl" '"peer"' 0 0
fi

if [ -n "${RMSG_TWO_HOST_KEEP:-}" ]; then  # a folder shared with the host: the logs
  mkdir -p "$RMSG_TWO_HOST_KEEP/$role" && cp "$dir"/*.json* "$dir"/*.err "$RMSG_TWO_HOST_KEEP/$role/" 2>/dev/null
fi
rm -rf "$dir"
[ $failed -eq 0 ] && echo "upgrade_two_host ($role): every case passed"
exit $failed
