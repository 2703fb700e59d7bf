// allocator/allocator_config.h
//
// SegmentAllocatorConfig is the tuning of the Neuron caching allocator. It is
// read from one environment variable,
//
//   TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG=key1=value1,key2=value2,...
//
// parsed once per process on the first allocator use and copied into every
// NeuronSegmentPool for the pool's lifetime (spec: "Neuron memory allocator
// configuration"). Parsing never fails: every problem becomes one warning line
// that names the key and the value, and the field keeps its default.
//
// Rules (exactly the spec's):
//  * Entries are separated by ','; surrounding ASCII whitespace is ignored, and
//    so are empty entries. An entry without '=' is ignored with a warning.
//  * Sizes are raw bytes written as a non-negative decimal integer: "1048576"
//    is valid, "1MB", "-1", "+5", "0x10" and "1e6" are not.
//  * kRoundupPower2Divisions is an integer in [1, 64]. A value that is not a
//    power of two is accepted and rounding uses the next lower power of two;
//    a warning says so.
//  * kSegmentAlignment must be a power of two.
//  * Unknown keys are ignored with a warning. A key given twice keeps the last
//    value, with a warning.
//  * kSmallSplitThreshold defaults to kMinRoundedSize and kLargeSplitThreshold
//    to kPoolBoundary unless they are set.
//  * Cross-field sanity: kSmallSegmentSize >= kPoolBoundary,
//    kMediumThreshold >= kPoolBoundary, kMediumSegmentSize >= kMediumThreshold.
//    When a pair is violated, the field that differs from its default reverts
//    to its default (the left-hand field when both do), with a warning naming
//    both fields. This repeats until every pair holds.
//
// All functions here are thread-safe.

#ifndef NEFFD_ALLOCATOR_ALLOCATOR_CONFIG_H_
#define NEFFD_ALLOCATOR_ALLOCATOR_CONFIG_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace neffd::allocator {

static_assert(sizeof(size_t) == sizeof(uint64_t), "64-bit sizes expected");

// The name of the environment variable that holds the configuration.
inline constexpr char kSegmentAllocatorConfigEnv[] =
    "TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG";

// One field per key of the spec, in the spec's order; the comment names the
// key. All sizes are bytes.
struct SegmentAllocatorConfig {
  size_t pool_boundary = size_t{1} << 20;          // kPoolBoundary
  size_t small_segment_size = size_t{2} << 20;     // kSmallSegmentSize
  size_t medium_segment_size = size_t{64} << 20;   // kMediumSegmentSize
  size_t medium_threshold = size_t{16} << 20;      // kMediumThreshold
  size_t segment_alignment = size_t{2} << 20;      // kSegmentAlignment
  size_t min_rounded_size = 256;                   // kMinRoundedSize
  size_t roundup_power2_divisions = 4;             // kRoundupPower2Divisions
  size_t small_split_threshold = 256;              // kSmallSplitThreshold
  size_t large_split_threshold = size_t{1} << 20;  // kLargeSplitThreshold
  size_t max_split_size_bytes =                    // kMaxSplitSizeBytes
      std::numeric_limits<size_t>::max();
  size_t max_non_split_rounding_bytes = size_t{20} << 20;  // kMaxNonSplit...

  friend bool operator==(const SegmentAllocatorConfig& a,
                         const SegmentAllocatorConfig& b);
};

// The result of parsing: the config to use and the warnings, one line each.
struct ParsedSegmentAllocatorConfig {
  SegmentAllocatorConfig config;
  std::vector<std::string> warnings;
};

// Parses the value of TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG. A pure function
// of `text`; the empty string gives the defaults and no warnings.
ParsedSegmentAllocatorConfig ParseSegmentAllocatorConfig(
    absl::string_view text);

// The eleven keys with their values, in the spec's order, e.g.
// {"kPoolBoundary", 1048576}.
std::vector<std::pair<std::string, size_t>> SegmentAllocatorConfigEntries(
    const SegmentAllocatorConfig& config);

// OK when `config` obeys every rule above (a parsed config always does);
// otherwise InvalidArgument naming the first broken rule. For configs built
// by hand.
absl::Status ValidateSegmentAllocatorConfig(
    const SegmentAllocatorConfig& config);

// Parses a size in the spec's syntax: bare decimal digits that fit in 64
// bits (no sign, suffix or whitespace). False otherwise.
bool ParseDecimalBytes(absl::string_view text, size_t* bytes);

// kRoundupPower2Divisions taken down to a power of two: the N of the rounding
// rule (see rounding.h).
size_t EffectiveRoundupDivisions(const SegmentAllocatorConfig& config);

// The raw value of TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG ("" when unset).
// The only function of the allocator that reads the environment; it reads
// through the registry (//config:env).
std::string ReadSegmentAllocatorConfigEnv();

// The process-wide configuration: parsed from the environment on the first
// call (its warnings are printed to stderr once, prefixed "neffd allocator: ")
// and the same object on every later call.
const ParsedSegmentAllocatorConfig& ProcessSegmentAllocatorConfig();

}  // namespace neffd::allocator

#endif  // NEFFD_ALLOCATOR_ALLOCATOR_CONFIG_H_
