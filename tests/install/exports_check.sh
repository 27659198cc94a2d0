#!/bin/bash
# librmsg.so exports exactly its public surface: every dynamic symbol it defines is an
# extern "C" rmsg_* function declared in include/rmsg/, or belongs to a name on the
# allowlist (cmake/librmsg.exports: the names at rmsg:: scope that include/rmsg/ declares;
# each must still be declared there), and no symbol belongs to a type include/rmsg/ only
# forward-declares (EventLoop::Impl, Messenger::Front, ...): those are internal. A template
# instance of another namespace over an rmsg type (std::deque<rmsg::Counter>::...) is not
# rmsg's and fails.
#   exports_check.sh LIBRMSG_SO SOURCE_DIR
set -euo pipefail
lib=$1 src=$2
allow=$src/cmake/librmsg.exports
headers=("$src"/include/rmsg/*.h)
bad=0
while IFS= read -r name; do
  [[ $name == operator* ]] && continue
  grep -qw -- "$name" "${headers[@]}" || { echo "exports: allowlisted '$name' is declared nowhere in include/rmsg/"; bad=1; }
done < <(grep -v '^#' "$allow" | grep -v '^$')
# Types the public headers name but never define: their members must stay inside.
mapfile -t opaque < <(grep -hoE '^\s+(class|struct) (RMSG_HIDDEN )?[A-Za-z_]+;' "${headers[@]}" | awk '{print $NF}' | tr -d ';' | sort -u)

n=0
while read -r sym; do
  n=$((n + 1))
  if [[ $sym =~ ^rmsg_[a-z0-9_]+$ ]]; then
    grep -qE "\\b$sym\\(" "${headers[@]}" || { echo "exports: C symbol $sym is not declared in include/rmsg/"; bad=1; }
    continue
  fi
  d=$(c++filt -- "$sym")
  d=${d#non-virtual thunk to }; d=${d#virtual thunk to }
  for p in "typeinfo name for " "typeinfo for " "vtable for " "VTT for " "guard variable for "; do d=${d#"$p"}; done
  scope=${d%%(*}
  # A template function's name starts with its return type: keep what follows the last
  # space outside <...>.
  scope=$(awk '{ depth = 0; cut = 0
                 for (i = 1; i <= length($0); i++) { c = substr($0, i, 1)
                   if (c == "<") depth++; else if (c == ">") depth--; else if (c == " " && depth == 0) cut = i }
                 print substr($0, cut + 1) }' <<<"$scope")
  if [[ $scope != rmsg::* ]]; then echo "exports: $d ($sym) is not rmsg's"; bad=1; continue; fi
  first=$(sed -E 's/^rmsg::([A-Za-z_0-9]+|operator[^(:<]*).*/\1/' <<<"$scope")
  if ! grep -qxF -- "$first" "$allow"; then echo "exports: $d: '$first' is not on cmake/librmsg.exports"; bad=1; continue; fi
  for t in "${opaque[@]}"; do
    if [[ $scope == *"::$t::"* ]]; then echo "exports: $d belongs to an internal type ($t)"; bad=1; fi
  done
done < <(nm -D --defined-only "$lib" | awk '$2 != "A" && $2 != "U" {print $3}' | sort -u)
[ $bad -eq 0 ] && echo "exports: $(basename "$lib") exports $n symbols, each public"
exit $bad
