#!/usr/bin/env bash
# Checks the layering of docs/ARCHITECTURE.md (issues 16 and 29): the client
# library, the allocator and the config package use nothing of the daemon's,
# and inside the daemon the gRPC layer (daemon/server) is on top.
#   1. none of their files includes a "daemon/..." header;
#   2. no target of theirs depends on a //daemon target (bazel query);
#   3. the rule is enforced by the build: a probe package under client/ whose
#      cc_library depends on //daemon/log must fail analysis with "is not
#      visible". The probe is removed on every exit path.
#   4. below the gRPC layer (every daemon package but daemon/server, the
#      composition root daemon/runtime and the command line in daemon/), no
#      file includes a daemon/server or daemon/runtime header or gRPC's C++
#      API (grpcpp/; daemon/etcd, etcd's client, excepted), and no target
#      depends on //daemon/server (bazel query);
#   5. a probe under daemon/tier depending on //daemon/server fails analysis
#      with "is not visible".
# Exit status 0 when all hold; otherwise each broken rule is named and the
# status is 1.
set -uo pipefail
cd "$(git rev-parse --show-toplevel)" || exit 1

failed=0
includes=$(grep -rn '#include "daemon/' client allocator config)
if [ -n "$includes" ]; then
  echo "layering: daemon headers included outside the daemon:"
  echo "$includes"
  failed=1
fi

below=$(find daemon -mindepth 1 -maxdepth 1 -type d \
  ! -name server ! -name runtime | sort)
# daemon/etcd is a gRPC client of etcd (issue 32), not the daemon's gRPC
# layer: it may use gRPC's C++ API, never daemon/server.
# shellcheck disable=SC2086
includes=$(grep -rnE '#include "(daemon/(server|runtime)/|grpcpp/)' $below |
  grep -vE '^daemon/etcd/[^:]+:[0-9]+:#include "grpcpp/')
if [ -n "$includes" ]; then
  echo "layering: the gRPC layer included from below it:"
  echo "$includes"
  failed=1
fi

query_errors=$(mktemp)
trap 'rm -f "$query_errors"' EXIT
# no_path FROM TO WHAT: fails when a dependency path leads from FROM to TO.
no_path() {
  local paths
  if ! paths=$(bazel query --noshow_progress "somepath($1, $2)" \
    2>"$query_errors"); then
    echo "layering: bazel query failed:"
    cat "$query_errors"
    failed=1
  elif [ -n "$paths" ]; then
    echo "layering: a dependency path $3:"
    echo "$paths"
    failed=1
  fi
}
no_path '//client/... + //allocator/... + //config/...' '//daemon/...' \
  'into //daemon'
below_targets=$(sed 's|^|//|; s|$|/...|' <<<"$below" | paste -sd+ -)
no_path "$below_targets" '//daemon/server/... + //daemon/runtime/...' \
  'from below the gRPC layer into it'

probes=()
trap 'rm -f "$query_errors"; rm -rf "${probes[@]}"' EXIT
# refused PROBE_DIR DEP: a cc_library in PROBE_DIR depending on DEP must fail
# analysis because DEP is not visible there.
refused() {
  local probe=$1 dep=$2 analysis
  if [ -e "$probe" ]; then
    echo "layering: $probe exists already" >&2
    exit 1
  fi
  probes+=("$probe")
  mkdir "$probe"
  cat >"$probe/BUILD.bazel" <<BUILD
# Written and removed by tests/checks/layering.sh: must not build.
cc_library(
    name = "probe",
    deps = ["$dep"],
)
BUILD
  if analysis=$(bazel build --nobuild "//$probe:probe" 2>&1); then
    echo "layering: //$probe depends on $dep and still builds"
    failed=1
  elif ! grep -q "is not visible" <<<"$analysis"; then
    echo "layering: //$probe failed for another reason than visibility:"
    echo "$analysis"
    failed=1
  fi
}
refused "client/layering_probe_$$" //daemon/log
refused "daemon/tier/layering_probe_$$" //daemon/server:service

echo "layering: $([ "$failed" -eq 0 ] && echo ok || echo broken)"
exit "$failed"
