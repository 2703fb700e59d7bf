#include "bench/storm/step_profile.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_util.h"

namespace neffd::bench {
namespace {

// One step's readings, the rank's and the daemon's, side by side (unix µs;
// 0 where missing).
struct Readings {
  CompilerTimes rank;
  DaemonStep daemon;
  // The store's copy starts once the waiters are answered, or at once when
  // nobody waited.
  int64_t store_start_us() const {
    return daemon.answered_us != 0 ? daemon.answered_us : daemon.renamed_us;
  }
};

using Reading = int64_t (*)(const Readings&);

// A segment is the time from one reading to another.
struct Segment {
  const char* name;
  Reading from;
  Reading to;
};

#define NEFFD_READING(expr) [](const Readings& r) -> int64_t { return expr; }

const std::vector<Segment>& DaemonSegments() {
  static const auto* const segments = new std::vector<Segment>{
      {"go → the daemon begins the Lock that is granted (call in)",
       NEFFD_READING(r.rank.go_us), NEFFD_READING(r.daemon.lock_started_us)},
      {"the grant (lookup, lease, lock files)",
       NEFFD_READING(r.daemon.lock_started_us),
       NEFFD_READING(r.daemon.lock_answered_us)},
      {"GRANTED sent → compile starts (answer out, lease, work dir)",
       NEFFD_READING(r.daemon.lock_answered_us),
       NEFFD_READING(r.rank.compile_start_us)},
      {"**go → compile starts**", NEFFD_READING(r.rank.go_us),
       NEFFD_READING(r.rank.compile_start_us)},
      {"compile end → the daemon begins Publish (staging, call in)",
       NEFFD_READING(r.rank.compile_end_us),
       NEFFD_READING(r.daemon.publish_started_us)},
      {"Publish → the verified NEFF is in the tier",
       NEFFD_READING(r.daemon.publish_started_us),
       NEFFD_READING(r.daemon.renamed_us)},
      {"tier → this host's waiters answered (hand-off, one notice)",
       NEFFD_READING(r.daemon.renamed_us), NEFFD_READING(r.daemon.answered_us)},
      {"answered → durable in the shared store (copy, fsyncs, index)",
       NEFFD_READING(r.store_start_us()), NEFFD_READING(r.daemon.durable_us)},
      {"Publish → durable in the shared store (all of the daemon's publish)",
       NEFFD_READING(r.daemon.publish_started_us),
       NEFFD_READING(r.daemon.durable_us)},
      {"durable → the compiling rank holds the path (answer out, client)",
       NEFFD_READING(r.daemon.durable_us), NEFFD_READING(r.rank.held_us)},
      {"**compile end → the compiling rank holds the path**",
       NEFFD_READING(r.rank.compile_end_us), NEFFD_READING(r.rank.held_us)},
  };
  return *segments;
}

const std::vector<Segment>& DirectSegments() {
  static const auto* const segments = new std::vector<Segment>{
      {"**go → compile starts** (lock held)", NEFFD_READING(r.rank.go_us),
       NEFFD_READING(r.rank.compile_start_us)},
      {"compile end → released (renamed, unlocked)",
       NEFFD_READING(r.rank.compile_end_us), NEFFD_READING(r.rank.released_us)},
      {"**compile end → the compiling rank holds the path**",
       NEFFD_READING(r.rank.compile_end_us), NEFFD_READING(r.rank.held_us)},
  };
  return *segments;
}

#undef NEFFD_READING

}  // namespace

std::string StepProfileTable(const std::string& label,
                             const std::map<int, CompilerTimes>& compiler,
                             const std::map<int, DaemonStep>& daemon) {
  std::string table = absl::StrCat("| ", label,
                                   ": the compiling rank's path | steps | p50 "
                                   "(ms) | p90 (ms) |\n|---|---:|---:|---:|\n");
  for (const Segment& segment :
       daemon.empty() ? DirectSegments() : DaemonSegments()) {
    std::vector<double> ms;
    for (const auto& [g, times] : compiler) {
      Readings readings{times, {}};
      if (auto step = daemon.find(g); step != daemon.end()) {
        readings.daemon = step->second;
      }
      const int64_t from = segment.from(readings);
      const int64_t to = segment.to(readings);
      if (from != 0 && to != 0) ms.push_back((to - from) / 1e3);
    }
    absl::StrAppend(&table, "| ", segment.name, " | ", ms.size(), " | ",
                    absl::StrFormat("%.2f | %.2f", Percentile(ms, 0.5),
                                    Percentile(ms, 0.9)),
                    " |\n");
  }
  return table;
}

}  // namespace neffd::bench
