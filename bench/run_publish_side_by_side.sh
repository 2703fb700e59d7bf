#!/usr/bin/env bash
# Issue 30, "a publish costs what its bytes cost": this build beside a
# baseline build, in one run, alternating, on the same machine:
#   1. the 128 KiB publish (bench/publish_small.h: end to end, the RPC alone,
#      the daemon's CPU, beside the hand-written durable write);
#   2. the storm, 32 ranks x 24 graphs of 128 KiB NEFFs (daemon and floor),
#      with its step profile (bench/storm/step_profile.h; a baseline built
#      before it has no --profile flag);
#   3. the 256 MiB publish against cp + fsync (bench/publish_bench.cc).
# The baseline is a copy of a build of the baseline commit with this bench
# (its publish_bench and storm directories, runfiles dereferenced), e.g.
#   git worktree add /tmp/base c3f7833 && cp bench/publish_small.* ... &&
#   bazel build -c opt //bench:publish_bench //bench/storm:storm, then
#   cp -rL bazel-bin/bench/publish_bench{,.runfiles} $BASE/bench/ and
#   cp -rL bazel-bin/bench/storm/storm{,.runfiles} $BASE/storm/.
#
#   BASE=/tmp/base-bin bench/run_publish_side_by_side.sh
#   ROUNDS=1 PARTS="small" BASE=... bench/run_publish_side_by_side.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BASE=${BASE:?BASE=dir of the baseline build (bench/, storm/)}
ROUNDS=${ROUNDS:-3}
PARTS=${PARTS:-small storm large}
SMALL_RUNS=${SMALL_RUNS:-200}
OUT=${OUT:-/tmp/publish-side-by-side}
mkdir -p "$OUT"
bazel build -c opt //bench:publish_bench //bench/storm:storm
NEW=$OUT/new-bin
rm -rf "$NEW" && mkdir -p "$NEW/bench" "$NEW/storm"
cp -rL bazel-bin/bench/publish_bench bazel-bin/bench/publish_bench.runfiles \
  "$NEW/bench/"
cp -rL bazel-bin/bench/storm/storm bazel-bin/bench/storm/storm.runfiles \
  "$NEW/storm/"
echo "machine: nproc $(nproc); $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //');" \
  "commit $(git rev-parse --short HEAD); started $(date -u '+%F %T UTC')" |
  tee "$OUT/machine"
for round in $(seq "$ROUNDS"); do
  # Which build goes first alternates by round.
  if ((round % 2)); then order="new base"; else order="base new"; fi
  for build in $order; do
    if [[ $build == new ]]; then dir=$NEW; else dir=$BASE; fi
    if [[ " $PARTS " == *" small "* ]]; then
      "$dir/bench/publish_bench" --small_kib=128 --small_runs="$SMALL_RUNS" \
        --label="$build" --workdir="$OUT/work" |
        tee "$OUT/small.$build.$round.md"
    fi
    if [[ " $PARTS " == *" storm "* ]]; then
      "$dir/storm/storm" --ranks=32 --graphs=24 --neff_bytes=131072 \
        --compile_ms=200 --modes=daemon,floor --workdir="$OUT/storm" \
        --profile="$OUT/profile.$build.$round.md" |
        grep '^| [a-z]' | sed "s/^/$build $round /" |
        tee -a "$OUT/storm.rows"
    fi
    if [[ " $PARTS " == *" large "* ]]; then
      "$dir/bench/publish_bench" --runs=3 --mib=256 --workdir="$OUT/work" |
        tee "$OUT/large.$build.$round.md"
    fi
  done
done
echo "finished $(date -u '+%F %T UTC'); load $(cut -d' ' -f1-3 /proc/loadavg)" |
  tee -a "$OUT/machine"
