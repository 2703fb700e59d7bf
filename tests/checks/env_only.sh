#!/usr/bin/env bash
# Checks issue 29's first rule (docs/ARCHITECTURE.md, "One Env"): outside the
# Env (store/env.cc), production code under daemon/, store/ and client/ reads
# no clock, sleeps on none and starts no thread. Tests, benchmarks and test
# helpers are not production code. The documented exceptions, each with its
# reason, are the EXCEPTIONS below; a use of a clock or a thread anywhere
# else is named and the status is 1. An exception that matches nothing is
# stale and fails too, so the list stays true.
set -uo pipefail
cd "$(git rev-parse --show-toplevel)" || exit 1

# What counts: reading a clock, sleeping, starting a thread.
FORBIDDEN='absl::Now\(\)|absl::SleepFor\(|absl::GetCurrentTimeNanos|std::this_thread::sleep|std::thread\b|std::jthread|std::async\(|pthread_create|(steady|system|high_resolution)_clock::now|clock_gettime|gettimeofday|\btime\(nullptr\)'

# file:pattern, one per line, with the reason.
EXCEPTIONS=(
  # The Env itself: absl's clock and std::thread behind Env::Default().
  'store/env.cc:absl::Now()'
  'store/env.cc:steady_clock::now'
  'store/env.cc:absl::SleepFor('
  'store/env.cc:std::thread('
  'store/env.h:std::thread'
  # Log lines are stamped with the wall clock they were written at, whatever
  # clock a test gives the parts that log.
  'daemon/log/log.cc:absl::Now()'
  # The index is RocksDB's files, reached through RocksDB's own Env; a
  # corrupt index is renamed aside with the time in its name.
  'daemon/index/index.cc:absl::Now()'
)

failed=0
hits=$(grep -rnE "$FORBIDDEN" daemon store client \
  --include='*.cc' --include='*.h' |
  grep -vE '(_test|_bench|_fuzz)\.(cc|h):|/testing/|/test_|_test_util\.|^[^:]+:[0-9]+:\s*//')
used=()
while IFS= read -r hit; do
  [ -z "$hit" ] && continue
  file=${hit%%:*}
  allowed=0
  for i in "${!EXCEPTIONS[@]}"; do
    exception=${EXCEPTIONS[$i]}
    if [ "$file" = "${exception%%:*}" ] &&
      [[ "$hit" == *"${exception#*:}"* ]]; then
      allowed=1
      used[i]=1
    fi
  done
  if [ "$allowed" = 0 ]; then
    [ "$failed" = 0 ] && echo "env_only: a clock or a thread outside the Env:"
    echo "  $hit"
    failed=1
  fi
done <<<"$hits"
for i in "${!EXCEPTIONS[@]}"; do
  if [ -z "${used[i]:-}" ]; then
    echo "env_only: stale exception (matches nothing): ${EXCEPTIONS[$i]}"
    failed=1
  fi
done
exit "$failed"
