#!/usr/bin/env bash
# Installs what is missing, builds neffd and runs it in the foreground on its
# embedded defaults (the spec's directories, unix:/run/neffd/neffd.sock).
# Extra arguments go to neffd, e.g. --address=unix:/tmp/neffd.sock.
set -euo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh
bazel build -c opt //daemon:neffd //client:neffctl
exec bazel-bin/daemon/neffd "$@"
