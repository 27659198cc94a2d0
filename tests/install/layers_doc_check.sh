#!/bin/bash
# docs/architecture.md's layer table says what the build does: for each layer, its public
# headers and the layers it may use are those of cmake/layers.cmake (written by CMake to
# BUILD_DIR/layers.txt as "layer|headers|uses"), no row more, no row less.
#   layers_doc_check.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
table=$1/layers.txt doc=$2/docs/architecture.md
norm() { tr -d '`,' <<<"$1" | tr -s ' ' '\n' | { grep -v '^-*$' || true; } | sort | tr '\n' ' '; }
declare -A want_headers want_uses
while IFS='|' read -r layer headers uses; do
  want_headers[$layer]=$(norm "$headers"); want_uses[$layer]=$(norm "$uses")
done <"$table"
bad=0 seen=()
# Rows of the table: | layer | `src/layer/` | headers | what | may use |
while IFS='|' read -r _ layer folder headers _ uses _; do
  layer=$(tr -d ' ' <<<"$layer")
  [ "$(tr -d ' `' <<<"$folder")" = "src/$layer/" ] || continue
  seen+=("$layer")
  if [ -z "${want_headers[$layer]+set}" ]; then
    echo "layers: docs/architecture.md has a row for '$layer', which cmake/layers.cmake does not declare"; bad=1; continue
  fi
  if [ "$(norm "$headers")" != "${want_headers[$layer]}" ]; then
    echo "layers: $layer's public headers: docs say '$(norm "$headers")', the build '${want_headers[$layer]}'"; bad=1
  fi
  if [ "$(norm "$uses")" != "${want_uses[$layer]}" ]; then
    echo "layers: $layer may use: docs say '$(norm "$uses")', the build '${want_uses[$layer]}'"; bad=1
  fi
done < <(grep '^| ' "$doc")
for layer in "${!want_headers[@]}"; do
  [[ " ${seen[*]} " == *" $layer "* ]] || { echo "layers: docs/architecture.md has no row for layer '$layer'"; bad=1; }
done
[ $bad -eq 0 ] && echo "layers: docs/architecture.md's table is cmake/layers.cmake's (${#seen[@]} layers)"
exit $bad
