#!/bin/bash
# Installs the built Debian packages with apt on a throwaway copy of this machine's state,
# uses them from the standard paths, removes them, and throws the copy away: nothing on
# the machine changes. The copy: a private mount namespace (unshare -m) holding an overlay
# whose lower layer is / (read-only to it) and whose upper layer is a tmpfs; /proc, /sys
# and /dev are bound in and apt runs chrooted into it. (No debootstrap chroot: it would
# fetch a whole system; the machine's own / already is one.) Needs root. `make deb-check`.
#   deb_check.sh DEB_DIR SOURCE_DIR
set -euo pipefail
debs=$(realpath "$1") src=$(realpath "$2")
[ "$(id -u)" = 0 ] || { echo "deb check: needs root (mount namespace, chroot)" >&2; exit 1; }
ls "$debs"/*.deb >/dev/null || { echo "deb check: no packages in $debs (make deb)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Inside the namespace: every mount below vanishes with it.
unshare -m --propagation private /bin/bash -s "$tmp" "$debs" "$src" <<'INNER'
set -euo pipefail
tmp=$1 debs=$2 src=$3
mount -t tmpfs tmpfs "$tmp"
mkdir "$tmp/upper" "$tmp/work" "$tmp/root"
mount -t overlay overlay -o "lowerdir=/,upperdir=$tmp/upper,workdir=$tmp/work" "$tmp/root"
r=$tmp/root
for m in proc sys dev; do mount --rbind "/$m" "$r/$m"; done
mkdir -p "$r/tmp/rmsg-debs" "$r/tmp/rmsg-src"
mount --bind -o ro "$debs" "$r/tmp/rmsg-debs"
mount --bind -o ro "$src" "$r/tmp/rmsg-src"
chroot "$r" /bin/bash -s <<'CHROOT'
set -euo pipefail
fail() { echo "deb check: $*" >&2; exit 1; }
export DEBIAN_FRONTEND=noninteractive
! dpkg-query -W librmsg0 >/dev/null 2>&1 || fail "rmsg packages are already installed here"
debs=()
for d in /tmp/rmsg-debs/*.deb; do case "$d" in *-dbgsym_*) ;; *) debs+=("$d") ;; esac; done
apt-get install -y -q --no-install-recommends "${debs[@]}"
pkgs=(librmsg0 librmsg-socket0 librmsg-dev rmsg-socket rmsg-tools)
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" | grep 'install ok installed' >/dev/null || fail "$p not installed"
done
ldconfig -p | grep 'librmsg\.so\.0 ' >/dev/null || fail "librmsg.so.0 not in the linker cache"
out=$(mktemp -d)
# shellcheck disable=SC2046
c++ -std=c++20 -o "$out/echo" /tmp/rmsg-src/examples/echo_loop.cc $(pkg-config --cflags --libs rmsg)
# shellcheck disable=SC2046
cc -o "$out/c_api" /tmp/rmsg-src/tests/posix/c_api_test.c $(pkg-config --cflags --libs rmsg-socket)
"$out/echo" >/dev/null
"$out/c_api" >/dev/null
for t in rmsg-run rmsg-perf rmsg-info rmsg-keys rmsg-objstore rmsg-objstore-server; do
  "$t" --help >/dev/null || fail "$t --help failed"
  [ -f "/usr/share/man/man1/$t.1.gz" ] || fail "$t: no man page"
done
# The tools' own checks from the standard paths: rmsg-info's TCP self-check, run again on
# the socket shim with per-connection stats.
rmsg-info >/dev/null
rmsg-run --stats "$out/stats" rmsg-info >/dev/null
[ -s "$out/stats" ] || fail "rmsg-run recorded no connection"
apt-get purge -y -q "${pkgs[@]}" >/dev/null
left=$(ls /usr/include/rmsg /usr/lib/*/librmsg* /usr/lib/*/rmsg /usr/bin/rmsg-* 2>/dev/null || true)
[ -z "$left" ] || fail "left after purge: $left"
echo "deb check: apt installed ${pkgs[*]}; consumers built with pkg-config and ran; tools and man pages in place; rmsg-run recorded $(wc -l <"$out/stats") connection(s); purge left nothing"
CHROOT
INNER
