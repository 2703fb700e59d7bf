#include "allocator/rounding.h"

#include <algorithm>
#include <limits>

#include "absl/strings/str_format.h"

namespace neffd::allocator {
namespace {

constexpr size_t kMaxSize = std::numeric_limits<size_t>::max();

// `v` rounded up to a multiple of `step` (> 0); false on overflow.
inline bool RoundUp(size_t v, size_t step, size_t* out) {
  const size_t rem = v % step;
  if (rem == 0) {
    *out = v;
    return true;
  }
  const size_t add = step - rem;
  if (v > kMaxSize - add) return false;
  *out = v + add;
  return true;
}

inline size_t FloorPowerOfTwo(size_t v) {
  return size_t{1} << (63 - __builtin_clzll(v));
}

// Rounding below kMediumThreshold.
inline bool RoundBelowMedium(size_t s, size_t m, size_t n, size_t* out) {
  if (s <= m) {
    *out = m;
    return true;
  }
  // m * n cannot overflow unless m is huge; saturate.
  const size_t linear_limit = m > kMaxSize / n ? kMaxSize : m * n;
  if (n > 1 && s <= linear_limit) return RoundUp(s, m, out);
  const size_t step = std::max<size_t>(FloorPowerOfTwo(s) / n, 1);
  return RoundUp(s, step, out);
}

absl::Status Overflow(size_t bytes) {
  return absl::ResourceExhaustedError(absl::StrFormat(
      "neffd allocator: a request of %d bytes cannot be rounded within 64 "
      "bits",
      bytes));
}

}  // namespace

const char* PoolKindName(PoolKind pool) {
  return pool == PoolKind::kSmall ? "small" : "large";
}

const char* SegmentKindName(SegmentKind segment) {
  switch (segment) {
    case SegmentKind::kSmall:
      return "small";
    case SegmentKind::kMedium:
      return "medium";
    case SegmentKind::kPerRequest:
      return "per_request";
  }
  return "?";
}

bool PlaceRequestFast(const SegmentAllocatorConfig& config, size_t divisions,
                      size_t bytes, Placement* out) {
  out->requested = bytes;
  if (bytes == 0) {
    *out = Placement();
    return true;
  }
  if (bytes >= config.medium_threshold) {
    if (!RoundUp(bytes, config.segment_alignment, &out->rounded)) return false;
    out->pool = PoolKind::kLarge;
    out->segment = SegmentKind::kPerRequest;
    out->segment_bytes = out->rounded;
    return true;
  }
  if (!RoundBelowMedium(bytes, config.min_rounded_size, divisions,
                        &out->rounded)) {
    return false;
  }
  if (bytes < config.pool_boundary) {
    out->pool = PoolKind::kSmall;
    out->segment = SegmentKind::kSmall;
    out->segment_bytes = std::max(config.small_segment_size, out->rounded);
  } else {
    out->pool = PoolKind::kLarge;
    out->segment = SegmentKind::kMedium;
    out->segment_bytes = std::max(config.medium_segment_size, out->rounded);
  }
  return true;
}

absl::StatusOr<Placement> PlaceRequest(const SegmentAllocatorConfig& config,
                                       size_t bytes) {
  Placement placement;
  if (!PlaceRequestFast(config, EffectiveRoundupDivisions(config), bytes,
                        &placement)) {
    return Overflow(bytes);
  }
  return placement;
}

absl::StatusOr<size_t> RoundSize(const SegmentAllocatorConfig& config,
                                 size_t bytes) {
  absl::StatusOr<Placement> placement = PlaceRequest(config, bytes);
  if (!placement.ok()) return placement.status();
  return placement->rounded;
}

}  // namespace neffd::allocator
