#!/usr/bin/env bash
# Counts, in the test code of a revision (default HEAD), the real-clock
# reads and sleeps and the assertions that bound a duration measured on the
# real clock (issue 29: timing belongs in benchmarks and manual clocks, so
# both numbers should only go down). Heuristic by design: the patterns are
# the ones the tests use; the counts are compared between revisions.
#   bash tests/wall_clock_count.sh [REV]
set -uo pipefail
cd "$(git rev-parse --show-toplevel)" || exit 1
rev=${1:-HEAD}
uses=0
bounds=0
while IFS= read -r f; do
  text=$(git show "$rev:$f" 2>/dev/null) || continue
  u=$(grep -cE 'absl::Now\(\)|absl::SleepFor|sleep_for|steady_clock::now|time\.sleep\(|time\.(monotonic|time)\(\)' <<<"$text")
  b=$(grep -E '(EXPECT|ASSERT)_(LT|LE|GT|GE)\(' <<<"$text" |
    grep -cE 'absl::Now\(\)|took|elapsed|slowest|replaced|stopped|granted|waited|kept,|- start|- killed|- released')
  uses=$((uses + u))
  bounds=$((bounds + b))
done < <(git ls-tree -r --name-only "$rev" |
  grep -E '(_test\.cc|^tests/.*\.(cc|h|py))$')
echo "$rev: real-clock reads and sleeps in tests: $uses; wall-clock bounds: $bounds"
