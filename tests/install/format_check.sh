#!/bin/bash
# The code follows the repository's .clang-format: every tracked C++ file is unchanged by it.
set -euo pipefail
cd "$1"
command -v clang-format >/dev/null || { echo "clang-format is not installed (scripts/deps.sh installs it)"; exit 1; }
mapfile -t files < <(git ls-files '*.h' '*.cc' 2>/dev/null || find include src tests tools -name '*.h' -o -name '*.cc')
clang-format --dry-run --Werror "${files[@]}"
echo "format check: ${#files[@]} files follow .clang-format"
