#!/bin/sh
# Benchmark 5 (issue #8): neffd with 10^3..10^6 index entries: start to
# SERVING, RSS, Lookup p99 (vs. the 1,000-entry index of the same run),
# GetStats and `neffctl ls | wc -l`. Builds what it needs (-c opt), runs 5
# daemon starts per size, prints the table and writes docs/bench/scale.md,
# docs/bench/scale.dat and the plot docs/bench/scale.svg.
# SIZES=1000,1000000 for a shorter run.
set -eu
cd "$(dirname "$0")/.."
bazel build -c opt //bench:scale_bench
bazel-bin/bench/scale_bench --runs="${RUNS:-5}" \
    --sizes="${SIZES:-1000,10000,100000,1000000}" \
    --markdown=docs/bench/scale.md --data=docs/bench/scale.dat
gnuplot bench/scale.gp
echo "wrote docs/bench/scale.md docs/bench/scale.svg"
