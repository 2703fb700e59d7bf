#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test, then prints
# one line "N passed, N failed, N skipped" counting test cases: the source
# checks, the cases in the test.xml files this run's `bazel test` wrote
# (tests/count_results.py: a skip is not a pass, a "needs root" skip as root
# is a failure) and the fuzz targets. It is the last line of the output.
#
# The stages (issue 9), each followed by a "run_all: stage ... took N s" line:
#   0. tests/checks/*.sh                       (source checks, one case each:
#                                               format.sh, clang-format of
#                                               every tracked C/C++ file;
#                                               thread_safety.sh, clang-14
#                                               -Wthread-safety -Werror of
#                                               the annotated libraries;
#                                               layering.sh, nothing outside
#                                               daemon/ uses daemon/, and
#                                               visibility enforces it;
#                                               env_only.sh, no clock or
#                                               thread outside the Env)
#   1. bazel test --config=asan //...          (builds every target under
#                                               ASan + UBSan with gcc and
#                                               -Werror, which is the compile
#                                               check too, and runs every
#                                               test; a test tagged no_asan
#                                               would run in the plain build
#                                               instead: none is)
#   R. deploy/package.sh, then               (the release, issue 31: an
#      tests/release_test.sh                   optimised static build in its
#                                               own output base, its ELF
#                                               linkage, and its binaries
#                                               serving in a chroot of glibc
#                                               and the allowed sonames; one
#                                               case per check)
#   2. bazel test --config=tsan $TSAN_TESTS    (ThreadSanitizer, the tests
#                                               whose threads or processes
#                                               race on purpose)
#   3. tests/fuzz/run_fuzzers.sh               (libFuzzer, each target
#                                               $NEFFD_FUZZ_SECONDS s, default
#                                               30 (600 with --long), two at
#                                               a time; one case per target)
# There is no separate plain build: on 2 cores it cost 6 minutes of the
# 30-minute budget and compiles nothing the ASan build does not.
#
#   tests/run_all.sh          the CI run
#   tests/run_all.sh --long   the long variants: fault tests with
#                             NEFFD_FAULTS_LONG=1 (20 kill iterations),
#                             fuzzers 600 s each
# NEFFD_ASAN=0 runs stage 1 in the plain build instead (a quicker local run);
# NEFFD_RELEASE=0, NEFFD_TSAN=0 and NEFFD_FUZZ=0 skip stages R, 2 and 3.
set -uo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh || exit 1

LONG=()
FUZZ_SECONDS=()
if [ "${1:-}" = "--long" ]; then
  LONG=(--test_env=NEFFD_FAULTS_LONG=1)
  FUZZ_SECONDS=(600)
fi
# The concurrency tests recorded clean under TSan (docs/RELIABILITY.md). The
# daemons that lock_handoff_test starts inherit
# TSAN_OPTIONS, whose suppressions (third_party/tsan/suppressions.txt) cover
# what TSan reports inside Debian's uninstrumented gRPC and absl, never our
# code.
TSAN_TESTS=(
  //daemon/locks:lock_table_test
  //daemon/locks:file_locks_test
  //allocator:segment_pool_threads_test
  //tests:lock_handoff_test
  //daemon/runtime:stalled_store_test
  //client:cache_client_test
  //tests:concurrent_put_test
  //tests:admin_socket_test
  //tests:remote_tier_test
)
# concurrent_put_test runs 64 TSan-built `neffctl put` processes against a
# TSan-built daemon. (Its neffctl used to crash in protobuf's Map code: the
# TSan build saw protobuf's TSan-only class layout, the library did not;
# .bazelrc now hides __SANITIZE_THREAD__ from library headers.)

total_passed=0
total_failed=0
total_skipped=0
overall=0
# run_tests CONFIG QUERY BAZEL_ARGS...: `bazel test` with --config=CONFIG (or
# none for "plain") and BAZEL_ARGS; adds to the totals the cases of the test
# targets that `bazel query QUERY` lists, as this run left them
# (tests/count_results.py). --nocache_test_results: every test runs now, none
# is a result remembered from an earlier run or served by the disk cache.
run_tests() {
  local config=()
  [ "$1" = plain ] || config=(--config="$1")
  local query=$2
  shift 2
  local labels
  if ! labels=$(bazel query --noshow_progress "$query" 2>/dev/null); then
    echo "run_all: bazel query '$query' failed"
    total_failed=$((total_failed + 1))
    overall=1
    return
  fi
  local since
  since=$(date +%s)
  bazel test "${config[@]}" "${LONG[@]}" --nocache_test_results \
    --test_output=errors "$@"
  local status=$?
  local logs
  logs=$(bazel info "${config[@]}" bazel-testlogs 2>/dev/null)
  local counts
  # shellcheck disable=SC2086
  counts=$(python3 tests/count_results.py "$logs" "$since" $labels)
  sed '$d' <<<"$counts"
  read -r passed failed skipped < <(tail -1 <<<"$counts")
  # A failed `bazel test` is a failure even if every case it counted passed.
  if [ "$status" -ne 0 ] && [ "${failed:-0}" -eq 0 ]; then failed=1; fi
  echo "run_all: ${config[*]:-plain}: ${passed:-0} passed, ${failed:-1}" \
    "failed, ${skipped:-0} skipped"
  total_passed=$((total_passed + ${passed:-0}))
  total_failed=$((total_failed + ${failed:-1}))
  total_skipped=$((total_skipped + ${skipped:-0}))
  [ "$status" -eq 0 ] && [ "${failed:-1}" -eq 0 ] || overall=1
}

start=$SECONDS
# stage NAME: prints how long the stage that just ended took.
stage() {
  echo "run_all: stage $1 took $((SECONDS - start)) s"
  start=$SECONDS
}

# run_check SCRIPT: one test case, passed when tests/checks/SCRIPT exits 0.
run_check() {
  if bash "tests/checks/$1"; then
    echo "run_all: check $1 passed"
    total_passed=$((total_passed + 1))
  else
    echo "run_all: check $1 FAILED"
    total_failed=$((total_failed + 1))
    overall=1
  fi
}

run_check format.sh
run_check thread_safety.sh
run_check layering.sh
run_check env_only.sh
stage checks

# What `bazel test //...` runs: every test target but the manual ones.
ALL_TESTS='tests(//...) except attr(tags, manual, tests(//...))'
NO_ASAN="attr(tags, no_asan, $ALL_TESTS)"
if [ "${NEFFD_ASAN:-1}" = 1 ]; then
  run_tests asan "$ALL_TESTS except $NO_ASAN" --test_tag_filters=-no_asan //...
  no_asan=$(bazel query "$NO_ASAN" 2>/dev/null)
  # shellcheck disable=SC2086
  [ -z "$no_asan" ] || run_tests plain "$NO_ASAN" $no_asan
  figures=(--config=asan)
else
  run_tests plain "$ALL_TESTS" //...
  figures=()
fi
# What docs/RELIABILITY.md quotes: each fault test's recorded figures.
python3 tests/faults/report.py \
  "$(bazel info "${figures[@]}" bazel-testlogs 2>/dev/null)"
stage "tests (asan=${NEFFD_ASAN:-1})"
if [ "${NEFFD_RELEASE:-1}" = 1 ]; then
  release_line=
  if bash deploy/package.sh; then
    version=$(tr -d '[:space:]' <VERSION)
    release_log=$(mktemp)
    bash tests/release_test.sh "dist/neffd-$version-linux-x86_64.tar.gz" \
      "dist/neffd_${version}_amd64.deb" | tee "$release_log"
    release_line=$(tail -1 "$release_log")
    rm -f "$release_log"
  else
    echo "run_all: deploy/package.sh failed"
  fi
  read -r passed failed skipped < <(echo "$release_line" | sed -n \
    's/^release: \([0-9]*\) passed, \([0-9]*\) failed, \([0-9]*\) skipped$/\1 \2 \3/p')
  total_passed=$((total_passed + ${passed:-0}))
  total_failed=$((total_failed + ${failed:-1}))
  total_skipped=$((total_skipped + ${skipped:-0}))
  [ "${failed:-1}" -eq 0 ] || overall=1
  stage release
fi
if [ "${NEFFD_TSAN:-1}" = 1 ]; then
  run_tests tsan "set(${TSAN_TESTS[*]})" "${TSAN_TESTS[@]}"
  stage tsan
fi
if [ "${NEFFD_FUZZ:-1}" = 1 ]; then
  # Shown as it runs, on this script's own stdout: reopening /dev/stderr
  # (tee /dev/stderr) gives a second file offset, and in a log file that CI
  # redirected both streams to, the lines written through one offset
  # overwrote those written through the other, the final summary included.
  fuzz_log=$(mktemp)
  bash tests/fuzz/run_fuzzers.sh "${FUZZ_SECONDS[@]}" | tee "$fuzz_log"
  fuzz_line=$(tail -1 "$fuzz_log")
  rm -f "$fuzz_log"
  read -r passed failed < <(echo "$fuzz_line" |
    sed -n 's/^fuzz: \([0-9]*\) passed, \([0-9]*\) failed.*/\1 \2/p')
  total_passed=$((total_passed + ${passed:-0}))
  total_failed=$((total_failed + ${failed:-1}))
  [ "${failed:-1}" -eq 0 ] || overall=1
  stage fuzz
fi
echo "${total_passed} passed, ${total_failed} failed, ${total_skipped} skipped"
exit "$overall"
