// bench/storm/storm_daemon.h
//
// The neffd a storm's `daemon` mode runs against, and what the storm reads
// of it (docs/BENCHMARKS.md, "SPMD compile storm"): its counters (through
// `neffctl --json stats`, as an operator reads them), its process's CPU time
// and read(2) bytes (/proc), and from its log when it answered each key's
// parked waiters and when each graph's NEFF was renamed into its tier (the
// release the storm's notification is measured from), and when it granted
// and published each graph (bench/storm/step_profile.h).
//
// The daemon runs at info level: the `lock_granted`, `published` and
// `waiters_answered` lines are info lines. A graph g is the neff entry
// bench/GraphKey(g) (compiler version "bench", bench/storm/storm_rank.cc; key
// "storm{g}", bench/storm/ expected.h). Not thread-safe: one storm thread.
#ifndef NEFFD_BENCH_STORM_STORM_DAEMON_H_
#define NEFFD_BENCH_STORM_STORM_DAEMON_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "bench/storm/step_profile.h"
#include "tests/harness/process.h"

namespace neffd::bench {

// neffd on `root` (test_support::DaemonProcess's layout) with `flags` after
// the defaults, started; null after a line on stderr if it did not start.
std::unique_ptr<test_support::DaemonProcess> StartStormDaemon(
    const std::string& root, const std::vector<std::string>& flags);

// The daemon's counters and its process's resource use, at one moment;
// the storm subtracts two of them to count what the clock saw.
struct DaemonFigures {
  uint64_t store_metadata_ops = 0;
  uint64_t tier_filled_bytes = 0;  // bytes read from the shared store
  double cpu_s = 0;
  uint64_t read_chars = 0;
};

DaemonFigures ReadDaemonFigures(test_support::DaemonProcess& daemon);

// Polls the daemon's stats until its S3 outbox is empty; gives up after 10
// minutes with a line on stderr.
void WaitForUploads(test_support::DaemonProcess& daemon);

// What the daemon's log says of a storm.
struct DaemonAnswers {
  // Per publish: milliseconds from the Publish call to answering every
  // parked waiter.
  std::vector<double> answer_ms;
  // Graph -> when (unix µs) its NEFF was renamed into the daemon's tier.
  std::map<int, int64_t> released_us;
  // Graph -> the daemon's readings of its Lock and Publish.
  std::map<int, DaemonStep> steps;
};

DaemonAnswers ParseDaemonLog(const std::string& log);

}  // namespace neffd::bench

#endif  // NEFFD_BENCH_STORM_STORM_DAEMON_H_
