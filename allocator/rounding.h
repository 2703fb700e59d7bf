// allocator/rounding.h
//
// How a request of `s` bytes is rounded and placed (docs/ARCHITECTURE.md,
// "Allocator"). Let m = kMinRoundedSize and N = kRoundupPower2Divisions taken
// down to a power of two.
//
//   s == 0                     -> 0: an empty allocation, the pool is untouched
//   s <  kMediumThreshold:
//     s <= m                   -> m
//     N > 1 and s <= m * N     -> s rounded up to a multiple of m
//     otherwise                -> s rounded up to a multiple of 2^floor(log2
//     s)/N
//                                 (powers of two stay; N = 1 is pure pow2)
//   s >= kMediumThreshold      -> s rounded up to a multiple of
//   kSegmentAlignment
//
// Placement is decided by the requested size, before rounding:
//   s <  kPoolBoundary         -> small pool, new segments of kSmallSegmentSize
//   s <  kMediumThreshold      -> large pool, new segments of
//   kMediumSegmentSize otherwise                  -> large pool, a per-request
//   segment of exactly
//                                 the rounded size
// A new segment is never smaller than the rounded request (this matters only
// when kMinRoundedSize or a non-power-of-two boundary makes a rounded request
// outgrow the configured segment size).
//
// All functions are pure and thread-safe.

#ifndef NEFFD_ALLOCATOR_ROUNDING_H_
#define NEFFD_ALLOCATOR_ROUNDING_H_

#include <cstddef>

#include "absl/status/statusor.h"
#include "allocator/allocator_config.h"

namespace neffd::allocator {

enum class PoolKind : unsigned char { kSmall = 0, kLarge = 1 };
enum class SegmentKind : unsigned char { kSmall, kMedium, kPerRequest };

// "small" / "large".
const char* PoolKindName(PoolKind pool);
// "small" / "medium" / "per_request".
const char* SegmentKindName(SegmentKind segment);

// Where a request goes. For a 0-byte request every size is 0.
struct Placement {
  size_t requested = 0;
  size_t rounded = 0;
  PoolKind pool = PoolKind::kSmall;
  SegmentKind segment = SegmentKind::kSmall;
  // The size of the segment the pool asks the provider for when no cached
  // block fits.
  size_t segment_bytes = 0;
};

// The rounded size of a request of `bytes`, by the rule above.
// ResourceExhausted when the rounded size does not fit in size_t.
absl::StatusOr<size_t> RoundSize(const SegmentAllocatorConfig& config,
                                 size_t bytes);

// Rounding and placement of a request of `bytes`. ResourceExhausted when the
// rounded size does not fit in size_t.
absl::StatusOr<Placement> PlaceRequest(const SegmentAllocatorConfig& config,
                                       size_t bytes);

// The same as PlaceRequest without a Status, for the allocation fast path:
// false on overflow. `divisions` must be EffectiveRoundupDivisions(config).
bool PlaceRequestFast(const SegmentAllocatorConfig& config, size_t divisions,
                      size_t bytes, Placement* out);

}  // namespace neffd::allocator

#endif  // NEFFD_ALLOCATOR_ROUNDING_H_
