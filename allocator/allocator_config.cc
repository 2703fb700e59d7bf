#include "allocator/allocator_config.h"

#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "config/env.h"

namespace neffd::allocator {
namespace {

using Field = size_t SegmentAllocatorConfig::*;

enum class Check { kNone, kDivisions, kPowerOfTwo };

struct KeySpec {
  const char* name;
  Field field;
  Check check;
};

// The spec's keys, in the spec's order.
constexpr KeySpec kKeys[] = {
    {"kPoolBoundary", &SegmentAllocatorConfig::pool_boundary, Check::kNone},
    {"kSmallSegmentSize", &SegmentAllocatorConfig::small_segment_size,
     Check::kNone},
    {"kMediumSegmentSize", &SegmentAllocatorConfig::medium_segment_size,
     Check::kNone},
    {"kMediumThreshold", &SegmentAllocatorConfig::medium_threshold,
     Check::kNone},
    {"kSegmentAlignment", &SegmentAllocatorConfig::segment_alignment,
     Check::kPowerOfTwo},
    {"kMinRoundedSize", &SegmentAllocatorConfig::min_rounded_size,
     Check::kNone},
    {"kRoundupPower2Divisions",
     &SegmentAllocatorConfig::roundup_power2_divisions, Check::kDivisions},
    {"kSmallSplitThreshold", &SegmentAllocatorConfig::small_split_threshold,
     Check::kNone},
    {"kLargeSplitThreshold", &SegmentAllocatorConfig::large_split_threshold,
     Check::kNone},
    {"kMaxSplitSizeBytes", &SegmentAllocatorConfig::max_split_size_bytes,
     Check::kNone},
    {"kMaxNonSplitRoundingBytes",
     &SegmentAllocatorConfig::max_non_split_rounding_bytes, Check::kNone},
};
constexpr size_t kNumKeys = sizeof(kKeys) / sizeof(kKeys[0]);

// The pairs that must hold: config.*big >= config.*small.
struct Ordering {
  size_t big;  // index into kKeys
  size_t small;
};
constexpr Ordering kOrderings[] = {
    {1, 0},  // kSmallSegmentSize >= kPoolBoundary
    {3, 0},  // kMediumThreshold >= kPoolBoundary
    {2, 3},  // kMediumSegmentSize >= kMediumThreshold
};

constexpr size_t kSmallSegmentSizeKey = 1;
constexpr size_t kMediumSegmentSizeKey = 2;
constexpr size_t kSmallSplitThresholdKey = 7;
constexpr size_t kLargeSplitThresholdKey = 8;

constexpr char kPrefix[] = "TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG: ";

bool IsPowerOfTwo(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

const KeySpec* FindKey(absl::string_view name, size_t* index) {
  for (size_t i = 0; i < kNumKeys; ++i) {
    if (name == kKeys[i].name) {
      *index = i;
      return &kKeys[i];
    }
  }
  return nullptr;
}

// Empty when `v` is acceptable for `spec`, else the reason.
std::string RangeProblem(const KeySpec& spec, size_t v) {
  switch (spec.check) {
    case Check::kDivisions:
      if (v < 1 || v > 64) return "must be an integer in [1, 64]";
      return "";
    case Check::kPowerOfTwo:
      if (!IsPowerOfTwo(v)) return "must be a power of two";
      return "";
    case Check::kNone:
      return "";
  }
  return "";
}

}  // namespace

bool operator==(const SegmentAllocatorConfig& a,
                const SegmentAllocatorConfig& b) {
  for (const KeySpec& k : kKeys) {
    if (a.*k.field != b.*k.field) return false;
  }
  return true;
}

ParsedSegmentAllocatorConfig ParseSegmentAllocatorConfig(
    absl::string_view text) {
  ParsedSegmentAllocatorConfig result;
  SegmentAllocatorConfig& config = result.config;
  const SegmentAllocatorConfig defaults;
  std::vector<std::string>& warnings = result.warnings;
  bool seen[kNumKeys] = {};

  for (absl::string_view entry : absl::StrSplit(text, ',')) {
    entry = absl::StripAsciiWhitespace(entry);
    if (entry.empty()) continue;
    const size_t eq = entry.find('=');
    if (eq == absl::string_view::npos) {
      warnings.push_back(absl::StrFormat(
          "%signoring entry '%s' (key '%s', no value): expected key=value",
          kPrefix, entry, entry));
      continue;
    }
    const absl::string_view key =
        absl::StripAsciiWhitespace(entry.substr(0, eq));
    const absl::string_view value =
        absl::StripAsciiWhitespace(entry.substr(eq + 1));
    size_t index = 0;
    const KeySpec* spec = FindKey(key, &index);
    if (spec == nullptr) {
      warnings.push_back(
          absl::StrFormat("%signoring unknown key %s=%s", kPrefix, key, value));
      continue;
    }
    size_t parsed = 0;
    if (!ParseDecimalBytes(value, &parsed)) {
      warnings.push_back(absl::StrFormat(
          "%signoring %s=%s: not a non-negative decimal integer%s; keeping %d",
          kPrefix, key, value,
          spec->check == Check::kDivisions
              ? ""
              : " of bytes (no suffixes such as MB)",
          config.*spec->field));
      continue;
    }
    if (std::string problem = RangeProblem(*spec, parsed); !problem.empty()) {
      warnings.push_back(absl::StrFormat("%signoring %s=%s: %s; keeping %d",
                                         kPrefix, key, value, problem,
                                         config.*spec->field));
      continue;
    }
    if (seen[index]) {
      warnings.push_back(absl::StrFormat(
          "%s%s is given more than once; using the last value %s=%s", kPrefix,
          key, key, value));
    }
    seen[index] = true;
    config.*spec->field = parsed;
  }

  // Cross-field sanity; every revert makes a field default again, and the
  // defaults satisfy every pair, so this ends.
  for (bool changed = true; changed;) {
    changed = false;
    for (const Ordering& o : kOrderings) {
      const KeySpec& big = kKeys[o.big];
      const KeySpec& small = kKeys[o.small];
      if (config.*big.field >= config.*small.field) continue;
      const KeySpec& revert =
          config.*big.field != defaults.*big.field ? big : small;
      warnings.push_back(absl::StrFormat(
          "%s%s=%d must be >= %s=%d; %s reverts to its default %d", kPrefix,
          big.name, config.*big.field, small.name, config.*small.field,
          revert.name, defaults.*revert.field));
      config.*revert.field = defaults.*revert.field;
      changed = true;
    }
  }

  if (!seen[kSmallSplitThresholdKey]) {
    config.small_split_threshold = config.min_rounded_size;
  }
  if (!seen[kLargeSplitThresholdKey]) {
    config.large_split_threshold = config.pool_boundary;
  }
  for (size_t segment_key : {kSmallSegmentSizeKey, kMediumSegmentSizeKey}) {
    const KeySpec& seg = kKeys[segment_key];
    if (config.max_split_size_bytes < config.*seg.field) {
      warnings.push_back(absl::StrFormat(
          "%skMaxSplitSizeBytes=%d is below %s=%d: such segments are never "
          "split, so each request takes a whole one",
          kPrefix, config.max_split_size_bytes, seg.name, config.*seg.field));
    }
  }
  if (!IsPowerOfTwo(config.roundup_power2_divisions)) {
    warnings.push_back(absl::StrFormat(
        "%skRoundupPower2Divisions=%d is not a power of two; rounding uses %d "
        "divisions",
        kPrefix, config.roundup_power2_divisions,
        EffectiveRoundupDivisions(config)));
  }
  return result;
}

std::vector<std::pair<std::string, size_t>> SegmentAllocatorConfigEntries(
    const SegmentAllocatorConfig& config) {
  std::vector<std::pair<std::string, size_t>> entries;
  entries.reserve(kNumKeys);
  for (const KeySpec& k : kKeys) entries.emplace_back(k.name, config.*k.field);
  return entries;
}

absl::Status ValidateSegmentAllocatorConfig(
    const SegmentAllocatorConfig& config) {
  for (const KeySpec& k : kKeys) {
    if (std::string problem = RangeProblem(k, config.*k.field);
        !problem.empty()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "allocator config: %s=%d %s", k.name, config.*k.field, problem));
    }
  }
  for (const Ordering& o : kOrderings) {
    const KeySpec& big = kKeys[o.big];
    const KeySpec& small = kKeys[o.small];
    if (config.*big.field < config.*small.field) {
      return absl::InvalidArgumentError(
          absl::StrFormat("allocator config: %s=%d must be >= %s=%d", big.name,
                          config.*big.field, small.name, config.*small.field));
    }
  }
  return absl::OkStatus();
}

bool ParseDecimalBytes(absl::string_view text, size_t* bytes) {
  if (text.empty()) return false;
  for (char c : text) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  uint64_t v = 0;
  if (!absl::SimpleAtoi(text, &v)) return false;  // overflow
  *bytes = v;
  return true;
}

size_t EffectiveRoundupDivisions(const SegmentAllocatorConfig& config) {
  size_t n = config.roundup_power2_divisions;
  if (n <= 1) return 1;
  return size_t{1} << (63 - __builtin_clzll(n));
}

std::string ReadSegmentAllocatorConfigEnv() {
  return config::EnvSnapshot::FromProcessEnvironment().GetString(
      kSegmentAllocatorConfigEnv);
}

const ParsedSegmentAllocatorConfig& ProcessSegmentAllocatorConfig() {
  static const ParsedSegmentAllocatorConfig* const parsed = [] {
    auto* p = new ParsedSegmentAllocatorConfig(
        ParseSegmentAllocatorConfig(ReadSegmentAllocatorConfigEnv()));
    for (const std::string& w : p->warnings) {
      std::fprintf(stderr, "neffd allocator: %s\n", w.c_str());
    }
    return p;
  }();
  return *parsed;
}

}  // namespace neffd::allocator
