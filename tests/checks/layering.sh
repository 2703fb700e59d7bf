#!/usr/bin/env bash
# Checks the layering of docs/ARCHITECTURE.md (issue 16): the client library,
# the allocator and the config package use nothing of the daemon's.
#   1. none of their files includes a "daemon/..." header;
#   2. no target of theirs depends on a //daemon target (bazel query);
#   3. the rule is enforced by the build: a probe package under client/ whose
#      cc_library depends on //daemon/log must fail analysis with "is not
#      visible". The probe is removed on every exit path.
# Exit status 0 when all three hold; otherwise each broken rule is named and
# the status is 1.
set -uo pipefail
cd "$(git rev-parse --show-toplevel)" || exit 1

failed=0
includes=$(grep -rn '#include "daemon/' client allocator config)
if [ -n "$includes" ]; then
  echo "layering: daemon headers included outside the daemon:"
  echo "$includes"
  failed=1
fi

query_errors=$(mktemp)
trap 'rm -f "$query_errors"' EXIT
if ! paths=$(bazel query --noshow_progress \
  'somepath(//client/... + //allocator/... + //config/..., //daemon/...)' \
  2>"$query_errors"); then
  echo "layering: bazel query failed:"
  cat "$query_errors"
  failed=1
elif [ -n "$paths" ]; then
  echo "layering: a dependency path into //daemon:"
  echo "$paths"
  failed=1
fi

probe=client/layering_probe_$$
if [ -e "$probe" ]; then
  echo "layering: $probe exists already" >&2
  exit 1
fi
trap 'rm -f "$query_errors"; rm -rf "$probe"' EXIT
mkdir "$probe"
cat >"$probe/BUILD.bazel" <<'BUILD'
# Written and removed by tests/checks/layering.sh: must not build.
cc_library(
    name = "probe",
    deps = ["//daemon/log"],
)
BUILD
analysis=$(bazel build --nobuild "//$probe:probe" 2>&1)
if [ $? -eq 0 ]; then
  echo "layering: //$probe depends on //daemon/log and still builds"
  failed=1
elif ! grep -q "is not visible" <<<"$analysis"; then
  echo "layering: //$probe failed for another reason than visibility:"
  echo "$analysis"
  failed=1
fi

echo "layering: $([ "$failed" -eq 0 ] && echo ok || echo broken)"
exit "$failed"
