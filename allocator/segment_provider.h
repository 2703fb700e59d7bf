// allocator/segment_provider.h
//
// A SegmentProvider hands out and takes back the large, device-level memory
// regions ("segments") that NeuronSegmentPool carves blocks from. On a
// NeuronCore it is NRT's device memory; here HostMemoryProvider backs segments
// with anonymous host mappings, under a capacity limit, for tests and tools.
//
// NeuronSegmentPool calls its provider with the pool's lock held, so calls
// from one pool never overlap; a provider shared by several pools must be
// thread-safe (HostMemoryProvider is).

#ifndef NEFFD_ALLOCATOR_SEGMENT_PROVIDER_H_
#define NEFFD_ALLOCATOR_SEGMENT_PROVIDER_H_

#include <cstddef>
#include <limits>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace neffd::allocator {

class SegmentProvider {
 public:
  // Returned by FreeBytes() when the provider cannot tell.
  static constexpr size_t kUnknownFreeBytes =
      std::numeric_limits<size_t>::max();

  virtual ~SegmentProvider() = default;

  // A new segment of exactly `bytes` (> 0) bytes. ResourceExhausted when the
  // device is out of memory: the pool then flushes its cache and retries once.
  // Any other error is a failure the pool passes on without retrying.
  virtual absl::StatusOr<void*> AllocateSegment(size_t bytes) = 0;

  // Takes back a segment returned by AllocateSegment(bytes).
  virtual absl::Status FreeSegment(void* segment, size_t bytes) = 0;

  // Bytes still available, for error messages; kUnknownFreeBytes if unknown.
  virtual size_t FreeBytes() const = 0;
};

// Segments are anonymous private mappings (mmap), so memory is really
// reserved and touching it works; at most `capacity_bytes` may be out at once.
// Thread-safe.
class HostMemoryProvider : public SegmentProvider {
 public:
  static constexpr size_t kUnlimited = std::numeric_limits<size_t>::max();

  explicit HostMemoryProvider(size_t capacity_bytes = kUnlimited);
  // Segments still out are unmapped.
  ~HostMemoryProvider() override;

  HostMemoryProvider(const HostMemoryProvider&) = delete;
  HostMemoryProvider& operator=(const HostMemoryProvider&) = delete;

  // ResourceExhausted when `bytes` would exceed the capacity or mmap says
  // ENOMEM; InvalidArgument for 0 bytes; Internal for other mmap errors.
  absl::StatusOr<void*> AllocateSegment(size_t bytes) override;
  // InvalidArgument when `segment` is not a live segment of `bytes` bytes.
  absl::Status FreeSegment(void* segment, size_t bytes) override;
  // capacity - used; kUnknownFreeBytes when unlimited.
  size_t FreeBytes() const override;

  size_t capacity_bytes() const { return capacity_; }
  size_t used_bytes() const;
  size_t live_segments() const;

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  size_t used_ ABSL_GUARDED_BY(mu_) = 0;
  // Live mappings and their sizes, so misuse is reported instead of unmapping
  // the wrong range, and so the destructor can unmap leftovers.
  absl::flat_hash_map<void*, size_t> mappings_ ABSL_GUARDED_BY(mu_);
};

}  // namespace neffd::allocator

#endif  // NEFFD_ALLOCATOR_SEGMENT_PROVIDER_H_
