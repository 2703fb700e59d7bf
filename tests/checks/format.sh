#!/usr/bin/env bash
# Checks that every tracked C/C++ file is formatted by the repo's
# .clang-format (Google style, issue 16). Only files git tracks count (CI
# runs in a fresh clone; build outputs and generated code are not ours).
#
# Exit status 0 when clang-format would change nothing; otherwise the
# unformatted files are named, one a line, and the status is 1. Fix them with
# `clang-format -i FILE`.
set -uo pipefail
cd "$(git rev-parse --show-toplevel)" || exit 1

if ! command -v clang-format >/dev/null; then
  echo "format: clang-format is not installed" >&2
  exit 1
fi
mapfile -t files < <(git ls-files -- '*.cc' '*.h' '*.c')
# One clang-format run over all files (it reports every file, not only the
# first); each finding is a "FILE:LINE:COL: error: code should be
# clang-formatted" line.
mapfile -t unformatted < <(
  clang-format --dry-run -Werror "${files[@]}" 2>&1 |
    sed -n 's/^\(.*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' |
    sort -u)
for f in "${unformatted[@]}"; do
  echo "format: not clang-formatted: $f"
done
echo "format: ${#files[@]} files, ${#unformatted[@]} not formatted"
((${#unformatted[@]} == 0))
