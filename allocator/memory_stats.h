// allocator/memory_stats.h
//
// MemoryStats mirrors PyTorch's torch.cuda.memory_stats(): every statistic
// has a current and a peak value for all pools together ("all") and for the
// small and large pools. Invariants kept by NeuronSegmentPool at all times:
// reserved_bytes >= allocated_bytes >= requested_bytes, and
// active_bytes == allocated_bytes (there are no streams to wait for).
//
// Plain values; not synchronized.

#ifndef NEFFD_ALLOCATOR_MEMORY_STATS_H_
#define NEFFD_ALLOCATOR_MEMORY_STATS_H_

#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "allocator/rounding.h"

namespace neffd::allocator {

struct Stat {
  int64_t current = 0;
  int64_t peak = 0;
  int64_t allocated = 0;  // sum of increases since creation
  int64_t freed = 0;      // sum of decreases since creation

  void Increase(int64_t amount) {
    current += amount;
    allocated += amount;
    if (current > peak) peak = current;
  }
  void Decrease(int64_t amount) {
    current -= amount;
    freed += amount;
  }
  void ResetPeak() { peak = current; }
};

// Index 0 is "all", then one per PoolKind.
enum StatType : int { kStatAll = 0, kStatSmallPool = 1, kStatLargePool = 2 };
inline constexpr int kNumStatTypes = 3;

struct StatArray {
  std::array<Stat, kNumStatTypes> by_type;

  const Stat& all() const { return by_type[kStatAll]; }
  const Stat& small_pool() const { return by_type[kStatSmallPool]; }
  const Stat& large_pool() const { return by_type[kStatLargePool]; }

  // Applies to "all" and to `pool`.
  void Increase(PoolKind pool, int64_t amount) {
    by_type[kStatAll].Increase(amount);
    by_type[1 + static_cast<int>(pool)].Increase(amount);
  }
  void Decrease(PoolKind pool, int64_t amount) {
    by_type[kStatAll].Decrease(amount);
    by_type[1 + static_cast<int>(pool)].Decrease(amount);
  }
  void ResetPeak() {
    for (Stat& s : by_type) s.ResetPeak();
  }
};

struct MemoryStats {
  StatArray allocation;            // number of live allocations
  StatArray segment;               // number of segments from the provider
  StatArray active;                // number of active blocks
  StatArray inactive_split;        // number of free blocks in split segments
  StatArray allocated_bytes;       // bytes in live blocks (rounded sizes)
  StatArray reserved_bytes;        // bytes in segments
  StatArray active_bytes;          // bytes in active blocks
  StatArray inactive_split_bytes;  // bytes in free blocks of split segments
  StatArray requested_bytes;       // bytes asked for by live allocations
  int64_t num_alloc_retries = 0;   // provider calls retried after a flush
  int64_t num_ooms = 0;            // allocations that failed for memory
  int64_t num_device_alloc = 0;    // segments obtained from the provider
  int64_t num_device_free = 0;     // segments returned to the provider
};

// PyTorch-style flat names, e.g. "allocated_bytes.all.current",
// "reserved_bytes.small_pool.peak", "num_ooms"; sorted by name.
std::vector<std::pair<std::string, int64_t>> MemoryStatsToDict(
    const MemoryStats& stats);

}  // namespace neffd::allocator

#endif  // NEFFD_ALLOCATOR_MEMORY_STATS_H_
