#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang-14 (ASan + UBSan +
# libFuzzer, in an output base of their own so the gcc build stays cached)
# and runs each one for SECONDS, starting from a copy of its committed seed
# corpus, $NEFFD_FUZZ_JOBS targets at a time (default 2: one per core of the
# CI machine). Prints one line per target and, last,
# "fuzz: N passed, N failed".
#
#   tests/fuzz/run_fuzzers.sh [SECONDS]     default: $NEFFD_FUZZ_SECONDS or 30
#
# 30 s per target keeps the CI run short (the seeds are replayed by every
# build anyway); `tests/run_all.sh --long` fuzzes 600 s per target.
#
# A crash leaves its input in $NEFFD_FUZZ_OUT (default
# /tmp/neffd-fuzz/out-<hash of the checkout's path>);
# copy it into tests/fuzz/corpus/<target>/ as a regression input, fix the
# bug, and the <target>_fuzz_test replays it in every build from then on.
set -uo pipefail
cd "$(dirname "$0")/../.."

TARGETS=(entry_key done_record allocator_config trace env_parse request)
seconds=${1:-${NEFFD_FUZZ_SECONDS:-30}}
jobs=${NEFFD_FUZZ_JOBS:-2}
tree=$(pwd | md5sum | cut -c1-8)  # one checkout's runs never meet another's
out=${NEFFD_FUZZ_OUT:-/tmp/neffd-fuzz/out-$tree}
base=${NEFFD_FUZZ_OUTPUT_BASE:-/tmp/neffd-fuzz/base-$tree}
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

# run_one TARGET: fuzzes it for $seconds; writes "ok LINE" or "failed LINE"
# to $out/TARGET.result.
run_one() {
  local t=$1 work="$out/$1.corpus" log="$out/$1.log" rc runs
  rm -rf "$work" && mkdir -p "$work"
  cp tests/fuzz/corpus/"$t"/* "$work"/
  "$bin/tests/fuzz/${t}_fuzzer" -max_total_time="$seconds" -rss_limit_mb=1024 \
    -timeout=10 -print_final_stats=1 -artifact_prefix="$out/$t-" \
    "$work" >"$log" 2>&1
  rc=$?
  runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" |
    grep -o '[0-9]*$')
  if [ "$rc" -eq 0 ]; then
    echo "ok fuzz $t: ok, ${runs:-?} inputs in ${seconds}s, corpus $(ls "$work" | wc -l)" \
      >"$out/$t.result"
  else
    { echo "failed fuzz $t: FAILED (exit $rc), see $log"
      grep -m5 -E 'ERROR|SUMMARY|==[0-9]+==' "$log"; } >"$out/$t.result"
  fi
}

running=0
for t in "${TARGETS[@]}"; do
  rm -f "$out/$t.result"
  if [ "$running" -ge "$jobs" ]; then
    wait -n
    running=$((running - 1))
  fi
  run_one "$t" &
  running=$((running + 1))
done
wait

passed=0
failed=0
for t in "${TARGETS[@]}"; do
  if grep -q '^ok ' "$out/$t.result" 2>/dev/null; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
  fi
  sed 's/^ok //; s/^failed //' "$out/$t.result" 2>/dev/null ||
    echo "fuzz $t: FAILED (no result)"
done
echo "fuzz: ${passed} passed, ${failed} failed"
[ "$failed" -eq 0 ]
