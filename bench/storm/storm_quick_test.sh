#!/usr/bin/env bash
# 16 ranks x 16 graphs, 20 ms compiles (±20 %), in every mode (both floors)
# in the same order, then (every mode but the floors) in random order, with
# the ranks reading every path again to check it instead of keeping what
# they read, and warm (every entry cached: nothing may compile). Exits
# non-zero only if a mode compiled a graph a wrong number of times, a rank
# failed or read wrong bytes; never on time.
set -euo pipefail
storm=("$TEST_SRCDIR/$TEST_WORKSPACE/bench/storm/storm" --ranks=16 --graphs=16
  --compile_ms=20 --neff_bytes=65536 --workdir="$TEST_TMPDIR/storm")
"${storm[@]}" --modes=daemon,fallback,legacy:100,floor,floor:durable
"${storm[@]}" --modes=daemon,fallback,legacy:100 --order=random \
  --keep_bytes_per_rank=0
"${storm[@]}" --modes=daemon,fallback,legacy:100 --warm
