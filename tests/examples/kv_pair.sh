#!/bin/bash
# Runs the key-value example as a user would: the server on two loop threads, a client
# that puts and gets every value back (64 B to 1 MiB, bytes checked) with a one-way note
# after each put, then SIGTERM: the server must drain and exit 0 with every key stored and
# every note counted.
#   kv_pair.sh KV_SERVER KV_CLIENT [COUNT]
set -euo pipefail
server=$1 client=$2 count=${3:-200}
coproc SRV { exec "$server" --loops 2; }
# bash forgets SRV once the server exits: keep its pid and output.
pid=$SRV_PID
exec {out}<&"${SRV[0]}"
trap 'kill -KILL "$pid" 2>/dev/null || true' EXIT
read -r -t 20 line <&"$out" || { echo "kv_pair: the server said nothing" >&2; exit 1; }
[[ "$line" == "kv_server: listening on "* ]] || { echo "kv_pair: unexpected: $line" >&2; exit 1; }
"$client" --server "${line##* }" --count "$count"
kill -TERM "$pid"
read -r -t 20 line <&"$out" || { echo "kv_pair: no word from the server after SIGTERM" >&2; exit 1; }
wait "$pid" || { echo "kv_pair: the server exited $?" >&2; exit 1; }
trap - EXIT
[[ "$line" == "kv_server: stopped (signal 15), $count keys, $count notes" ]] || { echo "kv_pair: unexpected: $line" >&2; exit 1; }
echo "kv_pair: ok"
