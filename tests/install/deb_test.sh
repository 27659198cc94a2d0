#!/bin/bash
# The built Debian packages, unpacked into a temporary root (dpkg -x: no install, nothing
# on the machine changes) and used as a user would: examples/echo_loop.cc and examples/kv/ (C++) built with
# `pkg-config --cflags --libs rmsg` and with find_package(rmsg), tests/posix/c_api_test.c
# (C) with `pkg-config --cflags --libs rmsg-socket`, each run against the unpacked
# libraries; every installed tool answers --help and has its man page; rmsg-run finds its
# preload module. The .pc files are relocatable (${pcfiledir}), so the root's own paths
# come out of pkg-config. Run by `make deb`; `make deb-check` installs them with apt.
#   deb_test.sh DEB_DIR SOURCE_DIR
set -euo pipefail
debs=$(realpath "$1") src=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
root=$tmp/root
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
lib=$root/usr/lib/$multiarch
fail() { echo "deb test: $*" >&2; exit 1; }

n=0
for deb in "$debs"/*.deb; do
  case "$deb" in *-dbgsym_*) continue ;; esac
  dpkg -x "$deb" "$root"
  n=$((n + 1))
done
[ "$n" -eq 5 ] || fail "expected 5 packages in $debs, found $n"

# The libraries under their SONAMEs, the links only in -dev.
for so in librmsg.so.0 librmsg-socket.so.0; do
  objdump -p "$lib/$so" | grep "SONAME *$so\$" >/dev/null || fail "$so: no SONAME $so"
done

export PKG_CONFIG_PATH=$lib/pkgconfig
pc=$(pkg-config --cflags --libs rmsg)
pc_socket=$(pkg-config --cflags --libs rmsg-socket)
[[ "$pc" == *"-I$root/"* && "$pc" == *"-L$root/"* ]] || fail "rmsg.pc does not point into the root: $pc"
# shellcheck disable=SC2086
c++ -std=c++20 -o "$tmp/echo_pc" "$src/examples/echo_loop.cc" $pc
# shellcheck disable=SC2086
cc -o "$tmp/c_api_pc" "$src/tests/posix/c_api_test.c" $pc_socket
cmake -S "$src/tests/install/consumer" -B "$tmp/consumer" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$root/usr" -DEXAMPLES_DIR="$src/examples" -DWITH_KV=ON >/dev/null
cmake --build "$tmp/consumer" >/dev/null
export LD_LIBRARY_PATH=$lib
for prog in "$tmp/echo_pc" "$tmp/c_api_pc" "$tmp/consumer/echo_loop"; do
  objdump -p "$prog" | grep -E 'NEEDED +librmsg(-socket)?\.so\.0$' >/dev/null || fail "$prog links no librmsg"
  "$prog" >/dev/null || fail "$prog failed"
done
# The kv example (a server and a client that need each other) is built and linked only:
# examples.kv_pair runs it.
for prog in "$tmp/consumer/kv_server" "$tmp/consumer/kv_client"; do
  objdump -p "$prog" | grep -E 'NEEDED +librmsg\.so\.0$' >/dev/null || fail "$prog links no librmsg"
done

for tool in rmsg-run rmsg-perf rmsg-info rmsg-keys rmsg-objstore rmsg-objstore-server; do
  "$root/usr/bin/$tool" --help >/dev/null || fail "$tool --help failed"
  [ -f "$root/usr/share/man/man1/$tool.1.gz" ] || fail "$tool: no man page"
done
zcat "$root/usr/share/man/man1/rmsg-run.1.gz" | grep '^\.SH ENVIRONMENT' >/dev/null ||
  fail "rmsg-run(1) has no ENVIRONMENT section"
# rmsg-run preloads the module it finds relative to itself.
# shellcheck disable=SC2016 # the child shell expands it
preload=$("$root/usr/bin/rmsg-run" sh -c 'printf %s "$LD_PRELOAD"')
[ "$preload" -ef "$lib/rmsg/librmsg-preload.so" ] || fail "rmsg-run preloads '$preload'"
echo "deb test: $n packages unpacked; pkg-config (C++ rmsg, C rmsg-socket) and find_package consumers built and ran; 5 tools --help, man pages, rmsg-run's module"
