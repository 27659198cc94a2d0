#!/bin/bash
# Fails when a file in src/ or include/rmsg/ includes a layer above its own (or beside it).
# The layers, lowest first, and what each may include, are docs/architecture.md's table.
#   layers_check.sh SOURCE_DIR
set -euo pipefail
cd "${1:-$(dirname "$0")/../..}"

# layer -> the layers it may include (besides itself)
declare -A allowed=(
  [base]=""
  [loop]="base"
  [stream]="base loop"
  [tcp]="base loop stream"
  [verbs]="base loop"
  [rdmacm]="base loop verbs"
  [rdma]="base loop stream verbs rdmacm"
  [cm]="base loop stream tcp verbs rdmacm rdma"
  [msg]="base loop stream tcp verbs rdmacm rdma cm"
  [posix]="base loop stream tcp verbs rdmacm rdma cm"
)
# public header -> its layer
declare -A public=(
  [result.h]=base [log.h]=base [counters.h]=base [address.h]=base
  [event_loop.h]=loop [loop_time.h]=loop [loop_threads.h]=loop
  [stream.h]=stream
  [tcp.h]=tcp
  [rdma_errors.h]=verbs
  [rdma.h]=rdma
  [connection_manager.h]=cm
  [messenger.h]=msg
  [socket.h]=posix
  [rpc.h]=msg
)

layer_of_header() {  # "rmsg/x.h" or "dir/x.h" -> layer, or empty when unknown
  local dir=${1%%/*} name=${1#*/}
  if [ "$dir" = rmsg ]; then echo "${public[$name]:-}"; else echo "$dir"; fi
}

bad=0
for h in include/rmsg/*.h; do
  if [ -z "${public[$(basename "$h")]:-}" ]; then
    echo "layers: $h is assigned to no layer (add it to tests/install/layers_check.sh)"; bad=1
  fi
done
while IFS= read -r file; do
  case "$file" in
    include/rmsg/*) own=${public[$(basename "$file")]:-} ;;
    src/*) own=$(echo "$file" | cut -d/ -f2) ;;
  esac
  [ -n "$own" ] || continue
  if [ -z "${allowed[$own]+set}" ]; then
    echo "layers: $file is in unknown layer '$own'"; bad=1; continue
  fi
  while IFS= read -r inc; do
    target=$(layer_of_header "$inc")
    if [ -z "$target" ]; then
      echo "layers: $file includes $inc, which belongs to no layer"; bad=1
    elif [ "$target" != "$own" ] && [[ " ${allowed[$own]} " != *" $target "* ]]; then
      echo "layers: $file ($own) includes $inc ($target): $own may include only: ${allowed[$own]:-nothing}"
      bad=1
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$file")
done < <(git ls-files 'src/*.h' 'src/*.cc' 'include/rmsg/*.h' 2>/dev/null || find src include -name '*.h' -o -name '*.cc')
[ $bad -eq 0 ] && echo "layers: every include points down"
exit $bad
