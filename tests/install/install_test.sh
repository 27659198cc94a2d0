#!/bin/bash
# Installs the build tree into a temporary prefix, then builds examples/echo_loop.cc
# against it twice, as a third party would: with find_package(rmsg) and with pkg-config.
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/rmsg/result.h"
test -f "$tmp/prefix/lib/cmake/rmsg/rmsgConfig.cmake"
test -f "$tmp/prefix/lib/pkgconfig/rmsg.pc"

cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DEXAMPLE_SOURCE="$src/examples/echo_loop.cc" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
"$tmp/consumer/echo_loop"

export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
# shellcheck disable=SC2046
g++ -std=c++20 -o "$tmp/echo_pc" "$src/examples/echo_loop.cc" $(pkg-config --cflags --libs --static rmsg)
"$tmp/echo_pc"
echo "install test: find_package and pkg-config consumers built and ran"
