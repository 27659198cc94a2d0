#!/bin/bash
# librmsg.so's exports against debian/librmsg0.symbols, both ways, without building the
# packages: a symbol the library lost fails `make deb` (dpkg-gensymbols), and one it gained
# needs its line with the version that first had it. Names are compared demangled, as the
# symbols file writes them.
#   symbols_check.sh LIBRMSG_SO SOURCE_DIR
set -euo pipefail
lib=$1 symbols=$2/debian/librmsg0.symbols
listed=$(sed -nE 's/^ (\(c\+\+\)"(.*)@Base"|([^ ]*)@Base) .*/\2\3/p' "$symbols" | sort -u)
exported=$(nm -D --defined-only "$lib" | awk '$2 != "A" && $2 != "U" {print $3}' | c++filt | sort -u)
gone=$(comm -23 <(echo "$listed") <(echo "$exported"))
new=$(comm -13 <(echo "$listed") <(echo "$exported"))
[ -z "$gone" ] || printf 'symbols: in %s but no longer exported (an ABI break):\n%s\n' "$symbols" "$gone"
[ -z "$new" ] || printf 'symbols: exported but not in %s (add a line with the next version):\n%s\n' "$symbols" "$new"
[ -z "$gone$new" ] || exit 1
echo "symbols: $(basename "$lib") exports the $(wc -l <<<"$listed") names of $(basename "$symbols")"
