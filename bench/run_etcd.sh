#!/bin/sh
# Issue 32's benchmark (bench/etcd_wakeup_bench.cc): three neffd hosts on one
# store; wake-up after a publish elsewhere and the waiting hosts' store
# operations, lease files (--poll_interval=1s) vs. --coordinator=etcd://, and
# the hand-over after a SIGKILL of the holding daemon. Writes
# docs/bench/etcd.md. KEYS=20 HANDOVERS=5 by default.
set -eu
cd "$(dirname "$0")/.."
bazel build -c opt //bench:etcd_wakeup_bench
bazel-bin/bench/etcd_wakeup_bench --keys="${KEYS:-20}" \
    --handovers="${HANDOVERS:-5}" --markdown=docs/bench/etcd.md
echo "wrote docs/bench/etcd.md"
