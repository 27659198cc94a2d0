#!/bin/bash
# Installs the build tree into a temporary prefix, then builds against it as a third party
# would, and runs what it built: examples/echo_loop.cc (C++), the test of a user's service on
# rmsg-testing (examples/testing, rmsg::testing) and the key-value example
# (examples/kv, run by tests/examples/kv_pair.sh) with find_package(rmsg), echo_loop with
# `pkg-config --cflags --libs rmsg` (no --static, whatever the library is), and the socket
# shim's C test (tests/posix/c_api_test.c, C) with `pkg-config --cflags --libs rmsg-socket`
# and again with rmsg's line (a C consumer of the umbrella module),
# with the tree's own compilers (CXX, CC). No consumer may receive rmsg's warning flags or
# -Werror: those are the project's, never an installed target's.
# It also builds and runs tests/install/rdma_consumer.cc, which calls every RDMA entry point
# (in a build without RDMA they must exist and answer not_supported). In a sanitizer tree
# (SANITIZE: RMSG_SANITIZE, as the TSan tree without RDMA) the consumers are built with the
# same -fsanitize, which the installed library needs; rmsg never hands it to them.
#   install_test.sh BUILD_DIR SOURCE_DIR [CXX [CC [SANITIZE]]]
set -euo pipefail
build=$(realpath "$1") src=$(realpath "$2") cxx=${3:-c++} cc=${4:-cc} sanitize=${5:-}
san=()
[ -z "$sanitize" ] || san=("-fsanitize=$sanitize")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
test -f "$tmp/prefix/include/rmsg/result.h"
test -f "$tmp/prefix/lib/cmake/rmsg/rmsgConfig.cmake"
test -f "$tmp/prefix/lib/pkgconfig/rmsg.pc"
test -f "$tmp/prefix/lib/pkgconfig/rmsg-socket.pc"
test -f "$tmp/prefix/lib/librmsg-testing.a"
test -f "$tmp/prefix/include/rmsg/testing/loopback.h"
project_flags='-Werror|-Wall|-Wextra|-Wpedantic|-Wshadow|-Wold-style-cast|-fsanitize'
if grep -E -- "INTERFACE_COMPILE_OPTIONS|$project_flags" "$tmp"/prefix/lib/cmake/rmsg/*.cmake; then
  echo "install test: the installed rmsg target carries compile options into consumers" >&2
  exit 1
fi

cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_CXX_FLAGS="${san[*]}" -DCMAKE_EXE_LINKER_FLAGS="${san[*]}" \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DEXAMPLES_DIR="$src/examples" \
  -DWITH_KV="$([[ -z "$sanitize" ]] && echo ON || echo OFF)" >/dev/null
cmake --build "$tmp/consumer" >/dev/null
if sed "s/${san[*]:-^$}//g" "$tmp/consumer/compile_commands.json" | grep -E -- "$project_flags"; then
  echo "install test: the find_package consumer was compiled with rmsg's own flags" >&2
  exit 1
fi
"$tmp/consumer/echo_loop"
"$tmp/consumer/upper_service_test" >/dev/null
# The key-value example in plain trees (the TSan tree runs its own build of it: examples.kv_pair).
if [[ -z "$sanitize" ]]; then
  "$src/tests/examples/kv_pair.sh" "$tmp/consumer/kv_server" "$tmp/consumer/kv_client" 50 >/dev/null
fi

export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig"
pc_flags=$(pkg-config --cflags --libs rmsg)
pc_socket_flags=$(pkg-config --cflags --libs rmsg-socket)
if grep -E -- "$project_flags" <<<"$pc_flags $pc_socket_flags"; then
  echo "install test: rmsg.pc or rmsg-socket.pc hands rmsg's own flags to consumers" >&2
  exit 1
fi
# shellcheck disable=SC2086
"$cxx" -std=c++20 "${san[@]}" -o "$tmp/echo_pc" "$src/examples/echo_loop.cc" $pc_flags
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/echo_pc"
# shellcheck disable=SC2086
"$cxx" -std=c++20 "${san[@]}" -o "$tmp/rdma_pc" "$src/tests/install/rdma_consumer.cc" $pc_flags
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/rdma_pc"
# shellcheck disable=SC2086
"$cc" "${san[@]}" -o "$tmp/c_api_pc" "$src/tests/posix/c_api_test.c" $pc_socket_flags
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/c_api_pc"
# The same C program with the umbrella module's line (rmsg requires rmsg-socket).
# shellcheck disable=SC2086
"$cc" "${san[@]}" -o "$tmp/c_api_rmsg_pc" "$src/tests/posix/c_api_test.c" $pc_flags
LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/c_api_rmsg_pc"
echo "install test: find_package and pkg-config consumers (C++: rmsg; C: rmsg and rmsg-socket) built with $cxx and $cc and ran"
