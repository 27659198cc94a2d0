#!/bin/sh
# The upgrade's module under the preload on the host: a plain program (upgrade_probe) under
# rmsg-run with RMSG_UPGRADE=on, against a plain peer, either way round, on 127.0.0.1. The
# probe checks every byte itself (the plain end receives exactly the program's bytes), and
# the shimmed end's stats line gives its reason (`loopback`): never a byte over RDMA.
#   upgrade_preload_host_test.sh BUILD_DIR PROBE
set -eu
build=$1
probe=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
export RMSG_UPGRADE=on
addr=127.0.0.1

mkfifo "$dir/port"
run_pair() {  # $1: prefix for the server, $2: for the client
  $1 "$probe" server $addr > "$dir/port" &
  server=$!
  read -r port < "$dir/port"  # the server's first line, once it listens
  $2 "$probe" client $addr "$port" 200 > /dev/null
  wait $server
}

run="$build/bin/rmsg-run --stats $dir/stats"
run_pair "" "$run"
run_pair "$run" ""
lines=$(wc -l < "$dir/stats")
[ "$lines" -eq 2 ] || { echo "expected 2 stats lines, got $lines"; cat "$dir/stats"; exit 1; }
if grep -v '"transport":"tcp"' "$dir/stats" || grep '"fallback":null' "$dir/stats" \
   || grep -v '"rdma_bytes_in":0,"rdma_bytes_out":0' "$dir/stats"; then
  echo "a connection to a plain peer claims RDMA"; exit 1
fi
[ "$(grep -c '"fallback":"loopback"' "$dir/stats")" -eq 2 ] \
  || { echo "expected reason loopback"; cat "$dir/stats"; exit 1; }
echo "upgrade_preload_host_test: the plain peers saw every byte"
cat "$dir/stats"
