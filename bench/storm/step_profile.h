// bench/storm/step_profile.h
//
// Where a storm step's milliseconds go on the compiling rank's path (issue
// 30's profile, docs/BENCHMARKS.md): from "go" to its compile's start, and
// from its compile's end to the moment it holds the path. Each segment is
// the difference of two readings of this host's wall clock, taken by the
// compiling rank (bench/storm/storm_rank.cc) and, in daemon mode, by the
// daemon (its `lock_granted`, `published` and `waiters_answered` log
// lines). The floor and legacy protocols have no daemon: their path is "go"
// → lock held → compile → released (renamed) → held.
//
// Not thread-safe: one storm thread.
#ifndef NEFFD_BENCH_STORM_STEP_PROFILE_H_
#define NEFFD_BENCH_STORM_STEP_PROFILE_H_

#include <cstdint>
#include <map>
#include <string>

namespace neffd::bench {

// The compiling rank's readings of one step (unix µs).
struct CompilerTimes {
  int64_t go_us = 0;             // it read "go"
  int64_t compile_start_us = 0;  // its compile function was called
  int64_t compile_end_us = 0;    // the compile function returned
  int64_t released_us = 0;       // floor, legacy: its NEFF was renamed
  int64_t held_us = 0;           // get-or-compile returned the path
};

// The daemon's readings of one graph's Lock and Publish (unix µs; 0 when
// its log had no such line).
struct DaemonStep {
  int64_t lock_started_us = 0;   // the granted Lock call began
  int64_t lock_answered_us = 0;  // ... and was answered GRANTED
  int64_t publish_started_us = 0;
  int64_t renamed_us = 0;   // the verified NEFF is in the tier
  int64_t answered_us = 0;  // this host's waiters were answered
  int64_t durable_us = 0;   // durable in the shared store: Publish returns
};

// A markdown table, one row per segment with its p50 and p90 over the
// steps (ms), headed by `label`. `daemon` is empty for protocols without
// one.
std::string StepProfileTable(const std::string& label,
                             const std::map<int, CompilerTimes>& compiler,
                             const std::map<int, DaemonStep>& daemon);

}  // namespace neffd::bench

#endif  // NEFFD_BENCH_STORM_STEP_PROFILE_H_
