// wake_bench: what one cross-process wake-up costs on this machine, the unit
// every step of the storm (bench/storm) pays several times: a rank's call
// waking the daemon, the daemon's answer waking the rank, a notice waking
// the waiters.
//
// Two processes ping-pong one byte over a pair of pipes: the parent writes,
// the child (blocked in read) wakes and writes back, the parent wakes and
// reads. Before each round trip the parent sleeps --gaps_us, so that with a
// gap the CPUs go idle in between, as they do during a compile. Both
// processes are pinned to CPU 0 ("same") or to CPUs 0 and 1 ("cross").
// Prints a markdown table of round-trip percentiles (µs): two wake-ups each.
//
//   bazel build -c opt //bench:wake_bench && bazel-bin/bench/wake_bench
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "bench/bench_util.h"

ABSL_FLAG(std::string, gaps_us, "0,1000,20000",
          "idle time before each round trip, comma-separated (µs)");
ABSL_FLAG(int, rounds, 300, "round trips per row");

namespace {

using neffd::bench::Percentile;

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    std::perror("sched_setaffinity");
    _exit(2);
  }
}

// Round trips (µs) with the child on `child_cpu`, the parent on CPU 0.
std::vector<double> RoundTrips(int child_cpu, absl::Duration gap, int rounds) {
  int to_child[2], to_parent[2];
  if (pipe(to_child) != 0 || pipe(to_parent) != 0) {
    std::perror("pipe");
    _exit(2);
  }
  const pid_t child = fork();
  if (child < 0) {
    std::perror("fork");
    _exit(2);
  }
  if (child == 0) {
    // Without the parent's ends, the child's read ends when the parent's
    // write end closes.
    close(to_child[1]);
    close(to_parent[0]);
    PinTo(child_cpu);
    char byte;
    while (read(to_child[0], &byte, 1) == 1) {
      if (write(to_parent[1], &byte, 1) != 1) break;
    }
    _exit(0);
  }
  close(to_child[0]);
  close(to_parent[1]);
  PinTo(0);
  std::vector<double> us;
  char byte = 0;
  for (int i = 0; i < rounds + 5; ++i) {
    if (gap > absl::ZeroDuration()) absl::SleepFor(gap);
    const absl::Time start = absl::Now();
    if (write(to_child[1], &byte, 1) != 1 ||
        read(to_parent[0], &byte, 1) != 1) {
      std::perror("ping-pong");
      _exit(2);
    }
    if (i >= 5) us.push_back(absl::ToDoubleMicroseconds(absl::Now() - start));
  }
  close(to_child[1]);
  close(to_parent[0]);
  waitpid(child, nullptr, 0);
  return us;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const int rounds = std::max(1, absl::GetFlag(FLAGS_rounds));
  const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  std::printf(
      "| idle gap (µs) | CPUs | round trip p50 (µs) | p90 (µs) | p99 (µs) "
      "|\n|---:|---|---:|---:|---:|\n");
  for (absl::string_view field :
       absl::StrSplit(absl::GetFlag(FLAGS_gaps_us), ',')) {
    int gap_us = 0;
    if (!absl::SimpleAtoi(field, &gap_us) || gap_us < 0) {
      std::fprintf(stderr, "--gaps_us: %s is not a number of µs\n",
                   std::string(field).c_str());
      return 2;
    }
    for (int child_cpu : {0, 1}) {
      if (child_cpu >= cpus) continue;
      const std::vector<double> us =
          RoundTrips(child_cpu, absl::Microseconds(gap_us), rounds);
      std::printf("| %d | %s | %.1f | %.1f | %.1f |\n", gap_us,
                  child_cpu == 0 ? "same" : "cross", Percentile(us, 0.5),
                  Percentile(us, 0.9), Percentile(us, 0.99));
    }
  }
  return 0;
}
