#!/bin/sh
# Makes each installed tool's man page from its own --help (help2man): one text says both,
# and the NAME line is the one below. rmsg-run's --help carries the socket shim's
# environment variables, so its page has an ENVIRONMENT section.
#   scripts/manpages.sh BIN_DIR OUT_DIR VERSION
# BIN_DIR holds the built tools (a build tree's bin/ runs them against its own libraries).
set -eu
[ $# -eq 3 ] || { echo "usage: $0 BIN_DIR OUT_DIR VERSION" >&2; exit 2; }
bin=$1 out=$2 version=$3
mkdir -p "$out"
bin=$(realpath "$bin")
wrap=$(mktemp -d)
trap 'rm -rf "$wrap"' EXIT
page() {
  # help2man makes a SYNOPSIS of "Usage:" lines; the tools print "usage:". A wrapper of
  # the tool's name (help2man names the page after the file it runs) capitalizes it.
  printf '#!/bin/sh\n"%s" "$@" | sed "s/^usage:/Usage:/"\n' "$bin/$1" >"$wrap/$1"
  chmod +x "$wrap/$1"
  # --version-string: the tools print their usage, not a version banner, for --version.
  help2man --no-info --section=1 --version-string="$version" --name="$2" \
    --output="$out/$1.1" "$wrap/$1"
}
page rmsg-run "run an unmodified program on rmsg's socket shim (LD_PRELOAD)"
page rmsg-perf "measure rmsg's latency and bandwidth against a baseline in the same run"
page rmsg-info "show rmsg's transports and RDMA devices, and run a TCP self-check"
page rmsg-keys "create node keys and check keyrings for authenticated rmsg messengers"
page rmsg-objstore "client of the rmsg object store (put, get, del, list, bench)"
page rmsg-objstore-server "in-memory object store served over rmsg RPC"
