#!/usr/bin/env bash
# 16 ranks x 16 graphs, 20 ms compiles, in every mode: exits non-zero only if
# a mode compiled a graph more than once, a rank failed or read wrong bytes.
set -euo pipefail
exec "$TEST_SRCDIR/$TEST_WORKSPACE/bench/storm/storm" --ranks=16 --graphs=16 \
  --compile_ms=20 --neff_bytes=65536 --poll_ms=100 \
  --modes=daemon,fallback,legacy --workdir="$TEST_TMPDIR/storm"
