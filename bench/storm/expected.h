// bench/storm/expected.h
//
// What the storm's fake compiler produces and what every rank must end up
// with, made so that the harness costs next to nothing inside the timed
// window: a NEFF is S bytes generated once per process before the clock
// starts (a seeded PRNG, the same in every process), stamped with its graph
// at the start of every 4 KiB page; a compile is a sleep of the graph's
// compile time (C jittered by up to ±20 % per graph, seeded) and one write
// of those bytes. Ranks check only the size and two stamps per step and
// compare every byte after the clock stops.
#ifndef NEFFD_BENCH_STORM_EXPECTED_H_
#define NEFFD_BENCH_STORM_EXPECTED_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace neffd::bench {

// The key of graph g.
std::string GraphKey(int g);

// Graph g's compile time: `base` scaled by a factor drawn uniformly from
// [1 - jitter, 1 + jitter] by (seed, g). Jitter spreads the compile ends
// over a poll interval, so a polling protocol's penalty is an average, not
// a fixed function of C modulo the interval.
absl::Duration CompileTime(absl::Duration base, double jitter, uint64_t seed,
                           int g);

// The order in which `rank` asks for the graphs: 0..graphs-1, or with
// seed >= 0 a permutation of its own (the driver replays it to know which
// graphs each step compiles).
std::vector<int> GraphOrder(int graphs, int seed, int64_t rank);

// The NEFF bytes of every graph, for one size.
class StormNeff {
 public:
  explicit StormNeff(size_t size);

  // Graph g's bytes; valid until the next call.
  absl::string_view Bytes(int g);

  // Constant time, for inside the timed window: the size and the stamps of
  // the first and last page are graph g's (catches a short, torn or wrong
  // file, not a wrong byte in between).
  bool LooksLike(int g, absl::string_view content) const;

  // Every byte, for after the clock.
  bool Matches(int g, absl::string_view content) const;

 private:
  bool PageMatches(int g, absl::string_view content, size_t page) const;

  std::string base_;     // unstamped
  std::string stamped_;  // base_ stamped for stamped_graph_
  int stamped_graph_ = -1;
};

// Reads the whole file at `path` into `buffer`, sized from fstat. A buffer
// that already has the size is reused without allocating, as a runtime's
// loader would: allocating 8 MiB afresh per step costs more CPU in page
// faults and zeroing than the read itself.
absl::Status ReadWhole(const std::string& path, std::string* buffer);

}  // namespace neffd::bench

#endif  // NEFFD_BENCH_STORM_EXPECTED_H_
