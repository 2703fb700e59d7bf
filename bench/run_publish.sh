#!/bin/sh
# Benchmark 4 (issue #8): Publish and Verify of a 256 MiB NEFF vs. cp + fsync
# and sha256sum. Builds what it needs (-c opt), runs 5 repetitions, prints
# the table and writes docs/bench/publish.md, docs/bench/publish.dat and the
# plot docs/bench/publish.svg. Run from anywhere inside the workspace.
set -eu
cd "$(dirname "$0")/.."
RUNS="${RUNS:-5}"
bazel build -c opt //bench:publish_bench
bazel-bin/bench/publish_bench --runs="$RUNS" --mib="${MIB:-256}" \
    --markdown=docs/bench/publish.md --data=docs/bench/publish.dat
gnuplot bench/publish.gp
echo "wrote docs/bench/publish.md docs/bench/publish.svg"
