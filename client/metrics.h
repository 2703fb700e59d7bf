// client/metrics.h
//
// Rank-side metrics in the torch-neuronx way: the tables named in
// TORCH_NEURONX_ENABLED_METRIC_TABLES are written as CSV files to
// TORCH_NEURONX_METRICS_DIR, one file per table and rank:
//
//   {metrics_dir}/neff_cache_rank{RANK}.csv   "metric,value" rows:
//       lookups, hits, waits, wait_seconds, compiles, compile_seconds,
//       fallbacks, failures, lock_timeouts, uncached
//   {metrics_dir}/allocator_rank{RANK}.csv    "metric,value" rows: the
//       allocator's statistics (torch.cuda.memory_stats() names)
//
// Files are replaced atomically, so a reader never sees half a table. Other
// table names are left to other components.
//
// Thread-safe.
#ifndef NEFFD_CLIENT_METRICS_H_
#define NEFFD_CLIENT_METRICS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace neffd {

// What one rank's cache client did, since it was created.
struct CacheCounters {
  uint64_t lookups = 0;     // entries asked for
  uint64_t hits = 0;        // found at once
  uint64_t waits = 0;       // found after waiting for another compile
  double wait_seconds = 0;  // time spent waiting for locks
  uint64_t compiles = 0;    // compile_fn runs
  double compile_seconds = 0;
  uint64_t fallbacks = 0;      // calls served without the daemon
  uint64_t failures = 0;       // compile failures returned (own or recorded)
  uint64_t lock_timeouts = 0;  // lock waits that ran out
  uint64_t uncached = 0;       // results returned without a cache entry
};

// The allocator table's rows, e.g. allocator::MemoryStatsToDict(...).
using StatsSource =
    std::function<std::vector<std::pair<std::string, int64_t>>()>;

class MetricsWriter {
 public:
  MetricsWriter(std::vector<std::string> enabled_tables,
                std::string metrics_dir, int64_t rank);

  bool neff_cache_enabled() const { return neff_cache_; }
  bool allocator_enabled() const { return allocator_; }

  // Writes the enabled tables now.
  absl::Status Write(const CacheCounters& counters,
                     const StatsSource& allocator) const;

  // File names, for tests and documentation.
  std::string NeffCachePath() const;
  std::string AllocatorPath() const;

 private:
  const std::string dir_;
  const int64_t rank_;
  bool neff_cache_ = false;
  bool allocator_ = false;
};

}  // namespace neffd

#endif  // NEFFD_CLIENT_METRICS_H_
