#!/bin/bash
# rmsg-run's own checks: one line of warning for a program the shim cannot see (statically
# linked; a Go program, recognised by its build information), none for an ordinary one,
# and a clear refusal when the library's path holds a space or colon (LD_PRELOAD splits
# there, so the shim would silently not load).
#   rmsg_run_test.sh BUILD_DIR STATIC_PROBE
set -euo pipefail
build=$(realpath "$1") static=$(realpath "$2")
run=$build/bin/rmsg-run
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "rmsg_run_test: $*" >&2; exit 1; }

# want_warning PROGRAM WORDS: exit 0, exactly one stderr line, naming WORDS.
want_warning() {
  "$run" "$1" 2>"$tmp/err" || fail "$1 did not run"
  [ "$(wc -l <"$tmp/err")" = 1 ] || fail "$1: expected one line, got: $(cat "$tmp/err")"
  grep -q "^rmsg-run: warning: .*$2" "$tmp/err" || fail "$1: no warning '$2': $(cat "$tmp/err")"
}
want_warning "$static" "statically linked"
cp /bin/true "$tmp/gofake"
printf '\377 Go buildinf:' >>"$tmp/gofake"  # the marker of every Go binary's build information
want_warning "$tmp/gofake" "a Go program"
"$run" /bin/true 2>"$tmp/err" || fail "/bin/true did not run"
[ ! -s "$tmp/err" ] || fail "/bin/true: unexpected stderr: $(cat "$tmp/err")"

for dir in "with space" "with:colon"; do
  mkdir -p "$tmp/$dir/bin" "$tmp/$dir/lib"
  cp "$run" "$tmp/$dir/bin/"
  cp "$build/lib/librmsg-preload.so" "$tmp/$dir/lib/"
  rc=0
  "$tmp/$dir/bin/rmsg-run" /bin/true 2>"$tmp/err" || rc=$?
  [ "$rc" = 2 ] || fail "library under '$dir': exit $rc, expected 2"
  grep -q "space or colon" "$tmp/err" || fail "library under '$dir': $(cat "$tmp/err")"
done
echo "rmsg-run: warnings and refusals as expected"
