// allocator/segment_pool.h
//
// NeuronSegmentPool is the per-device caching allocator of the Neuron client
// library (docs/ARCHITECTURE.md, "Allocator"), modelled on PyTorch's
// CUDACachingAllocator. It carves blocks out of segments obtained from a
// SegmentProvider and keeps freed blocks cached for reuse, so a training step
// that repeats its allocations stops calling the provider after the first step.
//
// Contract:
//  * Rounding. A request of s bytes becomes a block of RoundSize(s) bytes
//    (rounding.h). With m = kMinRoundedSize and N = kRoundupPower2Divisions
//    taken down to a power of two: s <= m -> m; below kMediumThreshold,
//    s <= m*N -> next multiple of m, else next multiple of 2^floor(log2 s)/N;
//    at or above kMediumThreshold -> next multiple of kSegmentAlignment.
//    A request of 0 bytes returns an empty Allocation and touches nothing.
//  * Pools. Requests below kPoolBoundary use the small pool (new segments of
//    kSmallSegmentSize); requests in [kPoolBoundary, kMediumThreshold) the
//    large pool (new segments of kMediumSegmentSize); larger requests the large
//    pool with a segment of exactly the rounded size. Pools never share blocks.
//  * Reuse. The free block with the smallest (size, address) that fits is
//    used. It is split when the remainder is at least the pool's split
//    threshold (kSmallSplitThreshold / kLargeSplitThreshold) and the block is
//    not above kMaxSplitSizeBytes. A block above kMaxSplitSizeBytes serves a
//    request only if it wastes at most kMaxNonSplitRoundingBytes. Freed
//    neighbours within a segment coalesce.
//  * Out of memory. When the provider says ResourceExhausted, every wholly
//    free cached segment is returned to it and the call is retried once
//    (num_alloc_retries); if it fails again Allocate returns ResourceExhausted
//    stating the requested, allocated, reserved and free bytes (num_ooms).
//  * Statistics follow torch.cuda.memory_stats() (memory_stats.h) and keep
//    reserved >= allocated >= requested at all times.
//
// Thread-safe: every method may be called from any thread; one mutex per pool
// serializes them, including the calls into the provider.

#ifndef NEFFD_ALLOCATOR_SEGMENT_POOL_H_
#define NEFFD_ALLOCATOR_SEGMENT_POOL_H_

#include <cstddef>
#include <memory>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "allocator/allocator_config.h"
#include "allocator/memory_stats.h"
#include "allocator/rounding.h"
#include "allocator/segment_provider.h"

namespace neffd::allocator {

// A live block. Empty (ptr == nullptr) for a request of 0 bytes.
struct Allocation {
  void* ptr = nullptr;
  size_t size = 0;       // the block's size: RoundSize(requested) or more
  size_t requested = 0;  // what the caller asked for

  bool empty() const { return ptr == nullptr; }
};

class NeuronSegmentPool {
 public:
  // A pool that snapshots `config` and carves from `provider`, which must
  // outlive the pool. InvalidArgument when `config` breaks a rule
  // (ValidateSegmentAllocatorConfig).
  static absl::StatusOr<std::unique_ptr<NeuronSegmentPool>> Create(
      const SegmentAllocatorConfig& config, SegmentProvider* provider);

  // The same with the process configuration, parsed from
  // TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG on the first call.
  static absl::StatusOr<std::unique_ptr<NeuronSegmentPool>>
  CreateFromEnvironment(SegmentProvider* provider);

  // Returns every segment to the provider; allocations still live become
  // invalid.
  ~NeuronSegmentPool();

  NeuronSegmentPool(const NeuronSegmentPool&) = delete;
  NeuronSegmentPool& operator=(const NeuronSegmentPool&) = delete;

  // A block of at least `bytes` bytes. ResourceExhausted when the provider is
  // out of memory even after flushing the cache (the message states requested,
  // allocated, reserved and free bytes); other provider errors pass through.
  absl::StatusOr<Allocation> Allocate(size_t bytes);

  // Frees the block at `ptr` (the ptr of a live Allocation). nullptr is a
  // no-op. InvalidArgument, with nothing changed, when `ptr` is not live.
  absl::Status Free(void* ptr);

  // Returns every wholly free cached segment to the provider; the number of
  // bytes released.
  size_t EmptyCache();

  // A consistent copy of the statistics.
  MemoryStats GetStats() const;

  // Sets every peak to its current value.
  void ResetPeakStats();

  // The snapshot this pool was created with.
  const SegmentAllocatorConfig& config() const;

 private:
  class Impl;
  explicit NeuronSegmentPool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace neffd::allocator

#endif  // NEFFD_ALLOCATOR_SEGMENT_POOL_H_
