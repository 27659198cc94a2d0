#!/bin/sh
# The object store tools' arguments (tools/objstore): --help/-h print the usage and exit 0;
# a bad or incomplete argument prints a message naming it and exits 2, and the server
# then serves nothing (it would block, and `timeout` would report 124). Then one real
# put/get through a server on an ephemeral port, and two benches at once (distinct node
# ids: neither resets the other's sessions, so neither fails).
# Usage: objstore_args_test.sh CLIENT SERVER
set -u
client=$1
server=$2
tmp=$(mktemp -d)
pid=
trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; fi; rm -rf "$tmp"' EXIT
fail=0

# expect STATUS PATTERN-IN-OUTPUT COMMAND...
expect() {
  want=$1 pattern=$2
  shift 2
  timeout 5 "$@" >"$tmp/out" 2>&1
  got=$?
  if [ "$got" != "$want" ] || { [ -n "$pattern" ] && ! grep -q -- "$pattern" "$tmp/out"; }; then
    echo "FAIL: $* -> status $got (want $want), output:"
    cat "$tmp/out"
    fail=1
  else
    echo "ok: $* -> $got"
  fi
}

expect 0 "usage: rmsg-objstore-server" "$server" --help
expect 0 "usage: rmsg-objstore-server" "$server" -h
expect 2 "needs a value" "$server" --listen
expect 2 "unknown argument 'extra'" "$server" --listen 127.0.0.1:0 extra
expect 2 "'abc' is not a number" "$server" --node abc
expect 2 "neither tcp nor rdma" "$server" --transport udp
expect 2 "host names are not resolved" "$server" --listen nosuchhost:7410
expect 0 "usage: rmsg-objstore " "$client" --help
expect 0 "usage: rmsg-objstore " "$client" -h
expect 2 "usage: rmsg-objstore " "$client" get
expect 2 "needs a value" "$client" get k --timeout
expect 2 "'abc' is not a number" "$client" --timeout abc get k
expect 2 "host names are not resolved" "$client" --connect nosuchhost:7410 get k
expect 2 "'x' is not a number" "$client" put k --size x
expect 2 "unknown option '--frob'" "$client" --frob 1 get k

# A real server on an ephemeral port.
"$server" --listen 127.0.0.1:0 >"$tmp/server" 2>&1 &
pid=$!
addr=
for _ in $(seq 1 100); do
  addr=$(sed -n 's/^objstore: node 1 serving on \([^ ]*\) .*/\1/p' "$tmp/server")
  [ -n "$addr" ] && break
  sleep 0.05
done
if [ -z "$addr" ]; then
  echo "FAIL: the server did not start:"
  cat "$tmp/server"
  exit 1
fi
expect 0 "" "$client" --connect "$addr" put key value
expect 0 "^value$" "$client" --connect "$addr" get key
expect 1 "not found" "$client" --connect "$addr" get nokey
"$client" --connect "$addr" bench --clients 2 --ops 400 --size 64 >"$tmp/b1" 2>&1 &
b1=$!
"$client" --connect "$addr" bench --clients 2 --ops 400 --size 64 >"$tmp/b2" 2>&1
s2=$?
wait "$b1"
s1=$?
if [ "$s1" != 0 ] || [ "$s2" != 0 ]; then
  echo "FAIL: two benches at once: status $s1 and $s2"
  cat "$tmp/b1" "$tmp/b2"
  fail=1
else
  echo "ok: two benches at once"
fi
exit $fail
