#!/bin/bash
# Installs the build tree into a temporary prefix and runs a program under the installed
# rmsg-run: it must find the installed librmsg-preload.so (bindir -> libdir) and the shim
# must write the program's two stats lines.
#   installed_run_test.sh BUILD_DIR PROBE
set -euo pipefail
build=$(realpath "$1") probe=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/rmsg/socket.h"
lib=$(find "$tmp/prefix" -name librmsg-preload.so)
test -n "$lib"
test -x "$tmp/prefix/bin/rmsg-run"
"$tmp/prefix/bin/rmsg-run" --stats "$tmp/stats.jsonl" "$probe" echo >/dev/null
lines=$(grep -c '"transport":"tcp"' "$tmp/stats.jsonl")
if [ "$lines" != 2 ]; then
  echo "installed rmsg-run: expected 2 stats lines, got $lines" >&2
  exit 1
fi
echo "installed rmsg-run: ran under $lib"
