#!/usr/bin/env bash
# Checks the ABSL_GUARDED_BY-style lock annotations (issue 16): clang-14 with
# -Wthread-safety -Werror compiles (syntax only) every .cc in each directory
# that holds an annotated file, so both the annotated classes and their users
# there are checked. The list is computed at each run from `git grep`, so a
# newly annotated library is checked without editing this script.
#
# Exit status 0 when clang reports nothing; otherwise clang's diagnostics are
# printed and the status is 1. Run from anywhere inside the repo; needs bazel
# (for the generated .pb.h headers) and clang++-14.
set -uo pipefail
cd "$(git rev-parse --show-toplevel)" || exit 1

# The generated protobuf and gRPC headers the sources include: protoc's
# genrules only (compiling the .pb.cc files too cost a minute of CI).
mapfile -t protoc_rules < <(bazel query --noshow_progress \
  'kind(genrule, //proto:all)' 2>/dev/null)
if ((${#protoc_rules[@]} == 0)) ||
  ! bazel build "${protoc_rules[@]}" >/dev/null 2>&1; then
  echo "thread_safety: building //proto's generated headers failed" >&2
  exit 1
fi
bin=$(bazel info bazel-bin 2>/dev/null) || exit 1

mapfile -t annotated < <(git grep -l \
  -e ABSL_GUARDED_BY -e ABSL_PT_GUARDED_BY -e ABSL_EXCLUSIVE_LOCKS_REQUIRED \
  -e ABSL_LOCKS_EXCLUDED -e ABSL_SHARED_LOCKS_REQUIRED -- '*.cc' '*.h')
mapfile -t dirs < <(for f in "${annotated[@]}"; do dirname "$f"; done |
  sort -u)
mapfile -t sources < <(for d in "${dirs[@]}"; do
  git ls-files -- "$d/*.cc" | grep -v "^$d/.*/"
done | sort -u)
if ((${#sources[@]} == 0)); then
  echo "thread_safety: no annotated sources found" >&2
  exit 1
fi

# Debian's absl, gRPC and gtest headers are found in /usr/include, which
# clang already searches as a system directory (warnings off there), so only
# our own code's diagnostics count. An explicit -isystem /usr/include would
# reorder it before libstdc++'s wrappers and break their #include_next.
flags=(
  -std=c++17 -Wthread-safety -Werror
  -I. -I"$bin" -I"$bin/proto"
)
# Two at a time (the CI machine has two cores); each failing file's name
# goes to a list that is reported at the end.
export FAILURES
FAILURES=$(mktemp)
pch_dir=$(mktemp -d)
trap 'rm -rf "$FAILURES" "$pch_dir"' EXIT
# The headers most files include (gRPC, protobuf, our protos, gtest, absl),
# parsed once into a precompiled header instead of once per file: about a
# third of the check's time. A missing #include it would hide is still an
# error in the gcc build.
cat >"$pch_dir/common.h" <<'HEADERS'
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <vector>
#include <grpcpp/grpcpp.h>
#include <google/protobuf/message.h>
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "proto/neffd/v1/neffd.pb.h"
HEADERS
if ! clang++-14 "${flags[@]}" -x c++-header \
    "$pch_dir/common.h" -o "$pch_dir/common.h.pch"; then
  echo "thread_safety: the precompiled header did not build" >&2
  exit 1
fi
flags+=(-fsyntax-only -include-pch "$pch_dir/common.h.pch")
printf '%s\0' "${sources[@]}" |
  xargs -0 -P 2 -I{} bash -c \
    'clang++-14 "${@:2}" "$1" || echo "$1" >>"$FAILURES"' _ {} "${flags[@]}"
mapfile -t failed < <(sort "$FAILURES")
echo "thread_safety: ${#sources[@]} files in ${#dirs[@]} directories," \
  "${#failed[@]} with findings${failed:+: ${failed[*]}}"
((${#failed[@]} == 0))
