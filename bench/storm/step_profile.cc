#include "bench/storm/step_profile.h"

#include <functional>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_util.h"

namespace neffd::bench {
namespace {

struct Segment {
  const char* name;
  // Milliseconds of one step; none where a reading is missing.
  std::function<std::optional<double>(const CompilerTimes&, const DaemonStep&)>
      ms;
};

std::optional<double> Between(int64_t from_us, int64_t to_us) {
  if (from_us == 0 || to_us == 0) return std::nullopt;
  return (to_us - from_us) / 1e3;
}

const std::vector<Segment>& DaemonSegments() {
  static const auto* const segments = new std::vector<Segment>{
      {"go → the daemon begins the Lock that is granted (call in)",
       [](const CompilerTimes& c, const DaemonStep& d) {
         return Between(c.go_us, d.lock_started_us);
       }},
      {"the grant (lookup, lease, lock files)",
       [](const CompilerTimes&, const DaemonStep& d) {
         return Between(d.lock_started_us, d.lock_answered_us);
       }},
      {"GRANTED sent → compile starts (answer out, lease, work dir)",
       [](const CompilerTimes& c, const DaemonStep& d) {
         return Between(d.lock_answered_us, c.compile_start_us);
       }},
      {"**go → compile starts**",
       [](const CompilerTimes& c, const DaemonStep&) {
         return Between(c.go_us, c.compile_start_us);
       }},
      {"compile end → the daemon begins Publish (staging, call in)",
       [](const CompilerTimes& c, const DaemonStep& d) {
         return Between(c.compile_end_us, d.publish_started_us);
       }},
      {"Publish → the verified NEFF is in the tier",
       [](const CompilerTimes&, const DaemonStep& d) {
         return Between(d.publish_started_us, d.renamed_us);
       }},
      {"tier → this host's waiters answered (hand-off, one notice)",
       [](const CompilerTimes&, const DaemonStep& d) {
         return Between(d.renamed_us, d.answered_us);
       }},
      {"answered → durable in the shared store (copy, fsyncs, index)",
       [](const CompilerTimes&, const DaemonStep& d) {
         return Between(d.answered_us != 0 ? d.answered_us : d.renamed_us,
                        d.durable_us);
       }},
      {"durable → the compiling rank holds the path (answer out, client)",
       [](const CompilerTimes& c, const DaemonStep& d) {
         return Between(d.durable_us, c.held_us);
       }},
      {"**compile end → the compiling rank holds the path**",
       [](const CompilerTimes& c, const DaemonStep&) {
         return Between(c.compile_end_us, c.held_us);
       }},
  };
  return *segments;
}

const std::vector<Segment>& DirectSegments() {
  static const auto* const segments = new std::vector<Segment>{
      {"**go → compile starts** (lock held)",
       [](const CompilerTimes& c, const DaemonStep&) {
         return Between(c.go_us, c.compile_start_us);
       }},
      {"compile end → released (renamed, unlocked)",
       [](const CompilerTimes& c, const DaemonStep&) {
         return Between(c.compile_end_us, c.released_us);
       }},
      {"**compile end → the compiling rank holds the path**",
       [](const CompilerTimes& c, const DaemonStep&) {
         return Between(c.compile_end_us, c.held_us);
       }},
  };
  return *segments;
}

}  // namespace

std::string StepProfileTable(const std::string& label,
                             const std::map<int, CompilerTimes>& compiler,
                             const std::map<int, DaemonStep>& daemon) {
  std::string table = absl::StrCat("| ", label,
                                   ": the compiling rank's path | steps | p50 "
                                   "(ms) | p90 (ms) |\n|---|---:|---:|---:|\n");
  const DaemonStep none;
  for (const Segment& segment :
       daemon.empty() ? DirectSegments() : DaemonSegments()) {
    std::vector<double> ms;
    for (const auto& [g, times] : compiler) {
      auto step = daemon.find(g);
      std::optional<double> v =
          segment.ms(times, step == daemon.end() ? none : step->second);
      if (v.has_value()) ms.push_back(*v);
    }
    absl::StrAppend(&table, "| ", segment.name, " | ", ms.size(), " | ",
                    absl::StrFormat("%.2f | %.2f", Percentile(ms, 0.5),
                                    Percentile(ms, 0.9)),
                    " |\n");
  }
  return table;
}

}  // namespace neffd::bench
