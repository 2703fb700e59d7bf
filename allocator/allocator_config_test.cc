#include "allocator/allocator_config.h"

#include <cstdlib>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neffd::allocator {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

constexpr size_t kMiB = size_t{1} << 20;

// Every warning is one line naming the key and the value.
void ExpectOneLineWarnings(const ParsedSegmentAllocatorConfig& parsed) {
  for (const std::string& w : parsed.warnings) {
    EXPECT_EQ(w.find('\n'), std::string::npos) << w;
    EXPECT_THAT(w, HasSubstr("TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG"));
  }
}

TEST(ParseSegmentAllocatorConfig, EmptyGivesSpecDefaults) {
  const ParsedSegmentAllocatorConfig parsed = ParseSegmentAllocatorConfig("");
  EXPECT_THAT(parsed.warnings, IsEmpty());
  const SegmentAllocatorConfig& c = parsed.config;
  EXPECT_EQ(c.pool_boundary, 1048576u);
  EXPECT_EQ(c.small_segment_size, 2097152u);
  EXPECT_EQ(c.medium_segment_size, 67108864u);
  EXPECT_EQ(c.medium_threshold, 16777216u);
  EXPECT_EQ(c.segment_alignment, 2097152u);
  EXPECT_EQ(c.min_rounded_size, 256u);
  EXPECT_EQ(c.roundup_power2_divisions, 4u);
  EXPECT_EQ(c.small_split_threshold, 256u);
  EXPECT_EQ(c.large_split_threshold, 1048576u);
  EXPECT_EQ(c.max_split_size_bytes, ~size_t{0});
  EXPECT_EQ(c.max_non_split_rounding_bytes, 20971520u);
  EXPECT_TRUE(c == SegmentAllocatorConfig());
}

TEST(ParseSegmentAllocatorConfig, EveryKeySetsItsField) {
  const ParsedSegmentAllocatorConfig parsed = ParseSegmentAllocatorConfig(
      "kPoolBoundary=524288,kSmallSegmentSize=4194304,"
      "kMediumSegmentSize=134217728,kMediumThreshold=33554432,"
      "kSegmentAlignment=4194304,kMinRoundedSize=512,"
      "kRoundupPower2Divisions=8,kSmallSplitThreshold=1024,"
      "kLargeSplitThreshold=2097152,kMaxSplitSizeBytes=536870912,"
      "kMaxNonSplitRoundingBytes=67108864");
  EXPECT_THAT(parsed.warnings, IsEmpty());
  const auto entries = SegmentAllocatorConfigEntries(parsed.config);
  using Entry = std::pair<std::string, size_t>;
  EXPECT_THAT(entries,
              ElementsAre(Entry{"kPoolBoundary", 524288},
                          Entry{"kSmallSegmentSize", 4194304},
                          Entry{"kMediumSegmentSize", 134217728},
                          Entry{"kMediumThreshold", 33554432},
                          Entry{"kSegmentAlignment", 4194304},
                          Entry{"kMinRoundedSize", 512},
                          Entry{"kRoundupPower2Divisions", 8},
                          Entry{"kSmallSplitThreshold", 1024},
                          Entry{"kLargeSplitThreshold", 2097152},
                          Entry{"kMaxSplitSizeBytes", 536870912},
                          Entry{"kMaxNonSplitRoundingBytes", 67108864}));
}

TEST(ParseSegmentAllocatorConfig, WhitespaceAndEmptyEntriesAreIgnored) {
  const ParsedSegmentAllocatorConfig parsed = ParseSegmentAllocatorConfig(
      " kMinRoundedSize = 512 ,, kRoundupPower2Divisions=8 ,");
  EXPECT_THAT(parsed.warnings, IsEmpty());
  EXPECT_EQ(parsed.config.min_rounded_size, 512u);
  EXPECT_EQ(parsed.config.roundup_power2_divisions, 8u);
}

TEST(ParseSegmentAllocatorConfig,
     SizeSuffixesAndNonDecimalsWarnAndKeepDefault) {
  for (const char* value : {"1MB", "1M", "-1", "+5", "0x10", "1e6", "", "1.5",
                            "18446744073709551616"}) {
    SCOPED_TRACE(value);
    const ParsedSegmentAllocatorConfig parsed =
        ParseSegmentAllocatorConfig(std::string("kPoolBoundary=") + value);
    ASSERT_THAT(parsed.warnings, SizeIs(1));
    EXPECT_THAT(parsed.warnings[0],
                AllOf(HasSubstr(std::string("kPoolBoundary=") + value),
                      HasSubstr("not a non-negative decimal integer")));
    EXPECT_EQ(parsed.config.pool_boundary, 1048576u);
    ExpectOneLineWarnings(parsed);
  }
}

TEST(ParseSegmentAllocatorConfig, LargestSizeIsAccepted) {
  const ParsedSegmentAllocatorConfig parsed =
      ParseSegmentAllocatorConfig("kMaxSplitSizeBytes=18446744073709551615");
  EXPECT_THAT(parsed.warnings, IsEmpty());
  EXPECT_EQ(parsed.config.max_split_size_bytes, ~size_t{0});
}

TEST(ParseSegmentAllocatorConfig, DivisionsMustBeInOneToSixtyFour) {
  for (const char* value : {"0", "65", "1000"}) {
    SCOPED_TRACE(value);
    const ParsedSegmentAllocatorConfig parsed = ParseSegmentAllocatorConfig(
        std::string("kRoundupPower2Divisions=") + value);
    ASSERT_THAT(parsed.warnings, SizeIs(1));
    EXPECT_THAT(
        parsed.warnings[0],
        AllOf(HasSubstr(std::string("kRoundupPower2Divisions=") + value),
              HasSubstr("[1, 64]")));
    EXPECT_EQ(parsed.config.roundup_power2_divisions, 4u);
  }
  for (size_t n : {1, 2, 64}) {
    const ParsedSegmentAllocatorConfig parsed = ParseSegmentAllocatorConfig(
        "kRoundupPower2Divisions=" + std::to_string(n));
    EXPECT_THAT(parsed.warnings, IsEmpty());
    EXPECT_EQ(parsed.config.roundup_power2_divisions, n);
    EXPECT_EQ(EffectiveRoundupDivisions(parsed.config), n);
  }
}

TEST(ParseSegmentAllocatorConfig, DivisionsNotAPowerOfTwoAreTakenDown) {
  const ParsedSegmentAllocatorConfig parsed =
      ParseSegmentAllocatorConfig("kRoundupPower2Divisions=5");
  EXPECT_EQ(parsed.config.roundup_power2_divisions, 5u);
  EXPECT_EQ(EffectiveRoundupDivisions(parsed.config), 4u);
  ASSERT_THAT(parsed.warnings, SizeIs(1));
  EXPECT_THAT(parsed.warnings[0],
              AllOf(HasSubstr("kRoundupPower2Divisions=5"),
                    HasSubstr("not a power of two"), HasSubstr("uses 4")));
  SegmentAllocatorConfig c;
  c.roundup_power2_divisions = 63;
  EXPECT_EQ(EffectiveRoundupDivisions(c), 32u);
}

TEST(ParseSegmentAllocatorConfig, SegmentAlignmentMustBeAPowerOfTwo) {
  for (const char* value : {"0", "3", "3145728"}) {
    SCOPED_TRACE(value);
    const ParsedSegmentAllocatorConfig parsed =
        ParseSegmentAllocatorConfig(std::string("kSegmentAlignment=") + value);
    ASSERT_THAT(parsed.warnings, SizeIs(1));
    EXPECT_THAT(parsed.warnings[0],
                AllOf(HasSubstr(std::string("kSegmentAlignment=") + value),
                      HasSubstr("power of two")));
    EXPECT_EQ(parsed.config.segment_alignment, 2097152u);
  }
  EXPECT_EQ(ParseSegmentAllocatorConfig("kSegmentAlignment=4096")
                .config.segment_alignment,
            4096u);
}

TEST(ParseSegmentAllocatorConfig, UnknownKeyWarnsWithKeyAndValue) {
  const ParsedSegmentAllocatorConfig parsed =
      ParseSegmentAllocatorConfig("kPoolBoundry=2097152,kMinRoundedSize=512");
  ASSERT_THAT(parsed.warnings, SizeIs(1));
  EXPECT_THAT(parsed.warnings[0], AllOf(HasSubstr("unknown key"),
                                        HasSubstr("kPoolBoundry=2097152")));
  EXPECT_EQ(parsed.config.pool_boundary, 1048576u);
  EXPECT_EQ(parsed.config.min_rounded_size, 512u);
}

TEST(ParseSegmentAllocatorConfig, EntryWithoutValueWarns) {
  const ParsedSegmentAllocatorConfig parsed =
      ParseSegmentAllocatorConfig("kPoolBoundary");
  ASSERT_THAT(parsed.warnings, SizeIs(1));
  EXPECT_THAT(parsed.warnings[0],
              AllOf(HasSubstr("'kPoolBoundary'"), HasSubstr("key=value")));
  EXPECT_TRUE(parsed.config == SegmentAllocatorConfig());
}

TEST(ParseSegmentAllocatorConfig, RepeatedKeyKeepsLastValueAndWarns) {
  const ParsedSegmentAllocatorConfig parsed =
      ParseSegmentAllocatorConfig("kMinRoundedSize=512,kMinRoundedSize=1024");
  ASSERT_THAT(parsed.warnings, SizeIs(1));
  EXPECT_THAT(parsed.warnings[0], AllOf(HasSubstr("more than once"),
                                        HasSubstr("kMinRoundedSize=1024")));
  EXPECT_EQ(parsed.config.min_rounded_size, 1024u);
}

TEST(ParseSegmentAllocatorConfig, InvalidRepeatKeepsEarlierValidValue) {
  const ParsedSegmentAllocatorConfig parsed =
      ParseSegmentAllocatorConfig("kMinRoundedSize=512,kMinRoundedSize=1KB");
  ASSERT_THAT(parsed.warnings, SizeIs(1));
  EXPECT_THAT(parsed.warnings[0], HasSubstr("keeping 512"));
  EXPECT_EQ(parsed.config.min_rounded_size, 512u);
}

TEST(ParseSegmentAllocatorConfig, SplitThresholdsFollowTheirBases) {
  SegmentAllocatorConfig c =
      ParseSegmentAllocatorConfig("kMinRoundedSize=512,kPoolBoundary=524288")
          .config;
  EXPECT_EQ(c.small_split_threshold, 512u);
  EXPECT_EQ(c.large_split_threshold, 524288u);

  c = ParseSegmentAllocatorConfig(
          "kMinRoundedSize=512,kSmallSplitThreshold=4096,"
          "kPoolBoundary=524288,kLargeSplitThreshold=8388608")
          .config;
  EXPECT_EQ(c.small_split_threshold, 4096u);
  EXPECT_EQ(c.large_split_threshold, 8388608u);
}

// One violated pair: a single warning naming both fields, and the field
// that differs from its default reverts.
TEST(ParseSegmentAllocatorConfig, CrossFieldViolationsRevertTheChangedField) {
  using Field = size_t SegmentAllocatorConfig::*;
  struct Case {
    const char* text;
    std::vector<std::string> warning;  // substrings of the one warning
    std::vector<std::pair<Field, size_t>> want;
  };
  const Case cases[] = {
      {"kSmallSegmentSize=524288",
       {"kSmallSegmentSize=524288", "kPoolBoundary=1048576",
        "kSmallSegmentSize reverts to its default 2097152"},
       {{&SegmentAllocatorConfig::small_segment_size, 2 * kMiB}}},
      // kPoolBoundary=32MB breaks two pairs; it reverts at the first, and
      // kLargeSplitThreshold follows the reverted value.
      {"kPoolBoundary=33554432",
       {"kSmallSegmentSize=2097152", "kPoolBoundary=33554432",
        "kPoolBoundary reverts to its default 1048576"},
       {{&SegmentAllocatorConfig::pool_boundary, kMiB},
        {&SegmentAllocatorConfig::large_split_threshold, kMiB}}},
      {"kPoolBoundary=4194304,kSmallSegmentSize=4194304,"
       "kMediumThreshold=2097152",
       {"kMediumThreshold=2097152", "kPoolBoundary=4194304",
        "kMediumThreshold reverts to its default 16777216"},
       {{&SegmentAllocatorConfig::medium_threshold, 16 * kMiB},
        {&SegmentAllocatorConfig::pool_boundary, 4 * kMiB}}},
      {"kMediumSegmentSize=8388608",
       {"kMediumSegmentSize=8388608", "kMediumThreshold=16777216",
        "kMediumSegmentSize reverts to its default 67108864"},
       {{&SegmentAllocatorConfig::medium_segment_size, 64 * kMiB}}},
      // Raising the threshold alone past the segment size reverts it.
      {"kMediumThreshold=134217728",
       {"kMediumSegmentSize=67108864", "kMediumThreshold=134217728",
        "kMediumThreshold reverts to its default 16777216"},
       {{&SegmentAllocatorConfig::medium_threshold, 16 * kMiB}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    const ParsedSegmentAllocatorConfig parsed =
        ParseSegmentAllocatorConfig(c.text);
    ASSERT_THAT(parsed.warnings, SizeIs(1));
    for (const std::string& part : c.warning) {
      EXPECT_THAT(parsed.warnings[0], HasSubstr(part));
    }
    for (const auto& [field, value] : c.want) {
      EXPECT_EQ(parsed.config.*field, value);
    }
    ExpectOneLineWarnings(parsed);
    EXPECT_TRUE(ValidateSegmentAllocatorConfig(parsed.config).ok());
  }
}

TEST(ParseSegmentAllocatorConfig, BothFieldsChangedRevertsTheLeftOneFirst) {
  // 1 MiB segments cannot hold an 8 MiB boundary: the segment size reverts
  // first; 2 MiB still cannot, so the boundary reverts too.
  const ParsedSegmentAllocatorConfig parsed = ParseSegmentAllocatorConfig(
      "kSmallSegmentSize=1048576,kPoolBoundary=8388608");
  ASSERT_THAT(parsed.warnings, SizeIs(2));
  EXPECT_THAT(parsed.warnings[0], HasSubstr("kSmallSegmentSize reverts"));
  EXPECT_THAT(parsed.warnings[1], HasSubstr("kPoolBoundary reverts"));
  EXPECT_EQ(parsed.config.small_segment_size, 2 * kMiB);
  EXPECT_EQ(parsed.config.pool_boundary, kMiB);
  EXPECT_TRUE(ValidateSegmentAllocatorConfig(parsed.config).ok());
}

TEST(ParseSegmentAllocatorConfig, MaxSplitBelowSegmentSizeWarnsButIsKept) {
  const ParsedSegmentAllocatorConfig parsed =
      ParseSegmentAllocatorConfig("kMaxSplitSizeBytes=33554432");
  ASSERT_THAT(parsed.warnings, SizeIs(1));
  EXPECT_THAT(parsed.warnings[0],
              AllOf(HasSubstr("kMaxSplitSizeBytes=33554432"),
                    HasSubstr("kMediumSegmentSize=67108864")));
  EXPECT_EQ(parsed.config.max_split_size_bytes, 32 * kMiB);
}

TEST(ParseSegmentAllocatorConfig, ManyProblemsGiveOneLineEach) {
  const ParsedSegmentAllocatorConfig parsed = ParseSegmentAllocatorConfig(
      "kPoolBoundary=1MB,kFoo=1,bare,kRoundupPower2Divisions=100,"
      "kSegmentAlignment=6,kMediumSegmentSize=1048576");
  EXPECT_THAT(parsed.warnings, SizeIs(6));
  ExpectOneLineWarnings(parsed);
  EXPECT_TRUE(parsed.config == SegmentAllocatorConfig());
}

TEST(ParseDecimalBytes, AcceptsBareDigitsThatFitIn64Bits) {
  size_t v = 7;
  EXPECT_TRUE(ParseDecimalBytes("0", &v));
  EXPECT_EQ(v, 0u);
  EXPECT_TRUE(ParseDecimalBytes("18446744073709551615", &v));
  EXPECT_EQ(v, ~size_t{0});
  for (const char* bad :
       {"", " 1", "1 ", "+1", "-1", "1MB", "0x10", "18446744073709551616"}) {
    EXPECT_FALSE(ParseDecimalBytes(bad, &v)) << bad;
  }
}

TEST(ValidateSegmentAllocatorConfig, RejectsBrokenRules) {
  EXPECT_TRUE(ValidateSegmentAllocatorConfig(SegmentAllocatorConfig()).ok());
  SegmentAllocatorConfig c;
  c.segment_alignment = 3;
  EXPECT_THAT(std::string(ValidateSegmentAllocatorConfig(c).message()),
              HasSubstr("kSegmentAlignment=3"));
  c = SegmentAllocatorConfig();
  c.roundup_power2_divisions = 0;
  EXPECT_FALSE(ValidateSegmentAllocatorConfig(c).ok());
  c = SegmentAllocatorConfig();
  c.medium_threshold = 1024;
  EXPECT_THAT(std::string(ValidateSegmentAllocatorConfig(c).message()),
              HasSubstr("kMediumThreshold=1024 must be >= kPoolBoundary"));
}

TEST(ProcessSegmentAllocatorConfig, ParsedOnceFromTheEnvironment) {
  ASSERT_EQ(
      setenv(kSegmentAllocatorConfigEnv, "kMinRoundedSize=1024,kBogus=1", 1),
      0);
  EXPECT_EQ(ReadSegmentAllocatorConfigEnv(), "kMinRoundedSize=1024,kBogus=1");
  const ParsedSegmentAllocatorConfig& first = ProcessSegmentAllocatorConfig();
  EXPECT_EQ(first.config.min_rounded_size, 1024u);
  EXPECT_THAT(first.warnings, SizeIs(1));
  // Changing the variable later has no effect on the snapshot.
  ASSERT_EQ(setenv(kSegmentAllocatorConfigEnv, "kMinRoundedSize=4096", 1), 0);
  const ParsedSegmentAllocatorConfig& second = ProcessSegmentAllocatorConfig();
  EXPECT_EQ(&first, &second);
  EXPECT_EQ(second.config.min_rounded_size, 1024u);
  unsetenv(kSegmentAllocatorConfigEnv);
  EXPECT_EQ(ReadSegmentAllocatorConfigEnv(), "");
}

}  // namespace
}  // namespace neffd::allocator
