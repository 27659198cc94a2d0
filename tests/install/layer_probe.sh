#!/bin/bash
# A wrong include fails the build: compiles one line against the include directories of the
# real layer targets (cmake/layers.cmake). What a layer may use must compile; a header of a
# layer above it, internal or public, must be "not found". Also: no include climbs out of
# its layer's tree with "../".
#   layer_probe.sh SOURCE_DIR CXX LOWER_INCLUDE_DIRS UPPER_LAYER
#   (LOWER_INCLUDE_DIRS: the include directories of a low layer's target, ';'-separated)
set -euo pipefail
src=$1 cxx=$2 dirs=$3
IFS=';' read -r -a lower <<<"$dirs"
flags=()
for d in "${lower[@]}"; do flags+=("-I$d"); done

probe() {  # probe EXPECT LINE: EXPECT is ok or missing
  local out
  if out=$(printf '%s\n' "$2" | "$cxx" -std=c++20 -fsyntax-only "${flags[@]}" -x c++ - 2>&1); then
    [ "$1" = ok ] && return 0
    echo "layer probe: '$2' compiled in ${dirs}; it must not" >&2; return 1
  fi
  if [ "$1" = missing ] && grep -qE 'No such file|file not found' <<<"$out"; then return 0; fi
  echo "layer probe: '$2' in ${dirs}: expected $1, got:" >&2; echo "$out" >&2; return 1
}
bad=0
probe ok '#include "loop/timer_heap.h"' || bad=1
probe ok '#include "base/copy_bytes.h"' || bad=1
probe ok '#include "rmsg/event_loop.h"' || bad=1
probe missing '#include "msg/messenger_impl.h"' || bad=1
probe missing '#include "tcp/tcp_stream.h"' || bad=1
probe missing '#include "rmsg/messenger.h"' || bad=1
probe missing '#include "rmsg/stream.h"' || bad=1
if grep -rnE '^\s*#\s*include\s*"\.\./' "$src/src" "$src/include"; then
  echo "layer probe: an include climbs out of its layer with ../" >&2; bad=1
fi
[ $bad -eq 0 ] && echo "layer probe: loop sees base and itself; msg, tcp and stream are not found"
exit $bad
