#!/usr/bin/env bash
# bench/run_neffcc.sh: neffcc's cost in one command. Builds
# //bench:neffcc_bench (with neffcc, neffd and the fake compiler) with -c opt
# and prints, as medians of --runs calls: a cached compile through neffcc
# against `cp` of the same NEFF (1, 64 and 512 MiB), and a miss through
# neffcc against the fake compiler called directly (sleeping --compile_ms),
# each as a ratio and a difference, with the load average.
#
#   bench/run_neffcc.sh [neffcc_bench flags, e.g. --runs=21 --compile_ms=500]
set -euo pipefail
cd "$(dirname "$0")/.."
bazel build -c opt //bench:neffcc_bench
"$(bazel info -c opt bazel-bin)/bench/neffcc_bench" "$@"
