#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang-14 (ASan + UBSan +
# libFuzzer, in an output base of their own so the gcc build stays cached)
# and runs each one for SECONDS, starting from a copy of its committed seed
# corpus. Prints one line per target and, last, "fuzz: N passed, N failed".
#
#   tests/fuzz/run_fuzzers.sh [SECONDS]     default: $NEFFD_FUZZ_SECONDS or 20
#   NEFFD_FUZZ_LONG=1 tests/fuzz/run_fuzzers.sh   60 s each (the issue's figure)
#
# A crash leaves its input in $NEFFD_FUZZ_OUT (default /tmp/neffd-fuzz/out);
# copy it into tests/fuzz/corpus/<target>/ as a regression input, fix the
# bug, and the <target>_fuzz_test replays it in every build from then on.
set -uo pipefail
cd "$(dirname "$0")/../.."

TARGETS=(entry_key done_record allocator_config trace env_parse request)
seconds=${1:-${NEFFD_FUZZ_SECONDS:-20}}
if [ "${NEFFD_FUZZ_LONG:-0}" = 1 ]; then seconds=60; fi
out=${NEFFD_FUZZ_OUT:-/tmp/neffd-fuzz/out}
base=${NEFFD_FUZZ_OUTPUT_BASE:-/tmp/neffd-fuzz/base-$(pwd | md5sum | cut -c1-8)}
mkdir -p "$out"

labels=()
for t in "${TARGETS[@]}"; do labels+=("//tests/fuzz:${t}_fuzzer"); done
# --symlink_prefix=/: leave the workspace's bazel-* symlinks to the main build.
if ! bazel --output_base="$base" build --config=fuzz --symlink_prefix=/ \
    "${labels[@]}" >"$out/build.log" 2>&1; then
  tail -30 "$out/build.log"
  echo "fuzz: 0 passed, ${#TARGETS[@]} failed (build)"
  exit 1
fi
bin=$(bazel --output_base="$base" info --config=fuzz bazel-bin 2>/dev/null)

passed=0
failed=0
for t in "${TARGETS[@]}"; do
  work="$out/$t.corpus"
  rm -rf "$work" && mkdir -p "$work"
  cp tests/fuzz/corpus/"$t"/* "$work"/
  log="$out/$t.log"
  "$bin/tests/fuzz/${t}_fuzzer" -max_total_time="$seconds" -rss_limit_mb=1024 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$out/$t-" \
    "$work" >"$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" |
    grep -o '[0-9]*$')
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    echo "fuzz $t: ok, ${runs:-?} inputs in ${seconds}s, corpus $(ls "$work" | wc -l)"
  else
    failed=$((failed + 1))
    echo "fuzz $t: FAILED (exit $rc), see $log"
    grep -m5 -E 'ERROR|SUMMARY|==[0-9]+==' "$log"
  fi
done
echo "fuzz: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
