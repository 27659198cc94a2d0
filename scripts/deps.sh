#!/bin/bash
# Installs the Debian packages a target needs, only when some are missing: when all are
# installed this runs nothing, not even apt-get update.
#   scripts/deps.sh build|test|demo|deb
set -euo pipefail
build=(cmake ninja-build g++ make pkg-config clang-format git libgtest-dev libgmock-dev libibverbs-dev
       librdmacm-dev rdma-core ibverbs-providers iproute2 libssl-dev)
# The Soft-RoCE tier boots Debian's kernel under qemu (tests/softroce/README.md).
softroce=(qemu-system-x86 linux-image-amd64 busybox-static cpio kmod ibverbs-utils
          rdmacm-utils perftest)
# The clang tree (Makefile: test-clang), named one by one: apt here installs no Recommends,
# and clang-14 alone lacks the sanitizer/libFuzzer runtimes and llvm-symbolizer.
clang=(clang-14 libclang-rt-14-dev llvm-14)
# The socket shim's real-program tests (tests/posix/programs/, label shim): the programs
# they run unmodified, Debian's /usr/bin/python3 that drives them, objdump for the import
# check.
shim=(iperf3 redis-server redis-tools python3 binutils)
# Debian packages (make deb): debhelper builds them, help2man makes the man pages from
# --help, lintian checks the result.
deb=(debhelper dpkg-dev fakeroot help2man lintian)
# The Makefile compiles through ccache when it is installed (a clean clone rebuilds fast).
cache=(ccache)
case "${1:-build}" in
  build|demo) want=("${build[@]}") ;;
  deb) want=("${build[@]}" "${deb[@]}") ;;
  test) want=("${build[@]}" "${softroce[@]}" "${clang[@]}" "${shim[@]}" "${cache[@]}") ;;
  *) echo "usage: $0 build|test|demo|deb" >&2; exit 2 ;;
esac
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'install ok installed' >/dev/null || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" != 0 ]; then
  echo "rmsg: missing Debian packages: ${missing[*]} (run as root, or apt-get install them)" >&2
  exit 1
fi
echo "rmsg: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# No package may start a daemon here (redis-server's would listen on 6379, iperf3's on
# 5201; the tests start their own on free ports): invoke-rc.d and deb-systemd-invoke ask
# policy-rc.d, and 101 means "not now". An existing policy (containers have one) stays.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
