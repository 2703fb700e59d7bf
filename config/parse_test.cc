#include "config/parse.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neffd::config::internal {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Optional;

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();

TEST(ParseBool, AcceptsEverySpellingInAnyCase) {
  for (absl::string_view on :
       {"1", "true", "TRUE", "True", "yes", "YeS", "on", "ON"}) {
    EXPECT_TRUE(ParseBool(on).value_or(false)) << on;
  }
  for (absl::string_view off :
       {"0", "false", "FALSE", "no", "No", "off", "Off"}) {
    EXPECT_FALSE(ParseBool(off).value_or(true)) << off;
  }
}

TEST(ParseBool, RejectsEverythingElse) {
  for (absl::string_view junk :
       {"", "2", "y", "n", "enable", " 1", "1 ", "truee", "-1", "0x1"}) {
    absl::StatusOr<bool> value = ParseBool(junk);
    ASSERT_FALSE(value.ok()) << junk;
    EXPECT_THAT(value.status().message(), HasSubstr("yes/no"));
  }
}

TEST(ParseDecimal, PlainDigitsInRange) {
  EXPECT_EQ(*ParseDecimal("0", 0, 3), 0);
  EXPECT_EQ(*ParseDecimal("3", 0, 3), 3);
  EXPECT_EQ(*ParseDecimal("007", 0, 10), 7);
  EXPECT_EQ(*ParseDecimal("9223372036854775807", 0, kNoMax), kNoMax);
}

TEST(ParseDecimal, RejectsOverflowSignJunkAndRange) {
  for (absl::string_view junk :
       {"", "4", "-1", "+1", " 1", "1 ", "1.0", "1e3", "0x10", "one",
        "9223372036854775808", "99999999999999999999999"}) {
    absl::StatusOr<int64_t> value = ParseDecimal(junk, 0, 3);
    ASSERT_FALSE(value.ok()) << junk;
    EXPECT_EQ(value.status().message(),
              "expected a plain decimal integer from 0 to 3");
  }
  EXPECT_FALSE(ParseDecimal("9223372036854775808", 0, kNoMax).ok());
  EXPECT_FALSE(ParseDecimal("0", 1, kNoMax).ok());
}

TEST(RangeText, OpenAndClosed) {
  EXPECT_EQ(RangeText(0, 3), "from 0 to 3");
  EXPECT_EQ(RangeText(1, kNoMax), ">= 1");
}

TEST(ParseIntList, IndicesAndRanges) {
  EXPECT_THAT(*ParseIntList("0,1,2-5", 0, 100, true),
              ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(*ParseIntList(" 3 , 1,1, 2-2 ", 0, 100, true),
              ElementsAre(1, 2, 3));
  EXPECT_THAT(*ParseIntList("", 0, 100, true), IsEmpty());
}

TEST(ParseIntList, RejectsReversedAndJunkRanges) {
  for (absl::string_view junk : {"5-2", "1-", "-1", "a-b", "1-2-3", "0,,1",
                                 "0,", "1;2", "101", "0-101"}) {
    EXPECT_FALSE(ParseIntList(junk, 0, 100, true).ok()) << junk;
  }
  EXPECT_THAT(ParseIntList("5-2", 0, 100, true).status().message(),
              HasSubstr("reversed"));
}

TEST(ParseIntList, PlainIntegersHaveNoRanges) {
  EXPECT_THAT(*ParseIntList("4,0,2", 0, kNoMax, false), ElementsAre(0, 2, 4));
  EXPECT_FALSE(ParseIntList("0-3", 0, kNoMax, false).ok());
  EXPECT_FALSE(ParseIntList("-1", 0, kNoMax, false).ok());
}

TEST(ParseNameList, Choices) {
  constexpr absl::string_view kModes = "runtime,cpu_util,host_memory,device";
  EXPECT_THAT(*ParseNameList("device, runtime,device", kModes),
              ElementsAre("device", "runtime"));
  EXPECT_THAT(*ParseNameList("", kModes), IsEmpty());
  absl::StatusOr<std::vector<std::string>> bad =
      ParseNameList("runtime,gpu", kModes);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("\"gpu\""));
  EXPECT_FALSE(ParseNameList("Runtime", kModes).ok());
}

TEST(ParseNameList, FreeNames) {
  EXPECT_THAT(*ParseNameList("op_table,graph-1.x", ""),
              ElementsAre("op_table", "graph-1.x"));
  EXPECT_FALSE(ParseNameList("a b", "").ok());
  EXPECT_FALSE(ParseNameList("a,,b", "").ok());
  EXPECT_FALSE(ParseNameList("a/b", "").ok());
}

TEST(CheckPlatform, Names) {
  for (absl::string_view ok : {"trn2", "trn3", "inf2", "trn1n"}) {
    EXPECT_TRUE(CheckPlatform(ok).ok()) << ok;
  }
  for (absl::string_view bad :
       {"", "trn", "TRN2", "2", "trn2.48xlarge", "trn 2", "trn2-x"}) {
    EXPECT_FALSE(CheckPlatform(bad).ok()) << bad;
  }
}

TEST(CheckAddress, UnixAndTcp) {
  for (absl::string_view ok : {"unix:/run/neffd/neffd.sock", "127.0.0.1:7878",
                               "localhost:1", "[::1]:65535"}) {
    EXPECT_TRUE(CheckAddress(ok).ok()) << ok;
  }
  for (absl::string_view bad :
       {"", "unix:", "unix:relative.sock", "/run/neffd.sock", "127.0.0.1",
        "127.0.0.1:0", "127.0.0.1:65536", ":80", "::1:80", "host:port"}) {
    EXPECT_FALSE(CheckAddress(bad).ok()) << bad;
  }
}

TEST(ParseTorchVersion, Forms) {
  using Version = std::pair<int, int>;
  EXPECT_EQ(*ParseTorchVersion("2.13"), Version(2, 13));
  EXPECT_EQ(*ParseTorchVersion("2.13.0+cpu"), Version(2, 13));
  EXPECT_EQ(*ParseTorchVersion("2.9.1"), Version(2, 9));
  EXPECT_EQ(*ParseTorchVersion("2.14.0a0+git1234"), Version(2, 14));
  for (absl::string_view bad : {"", "2", "two.13", "2.x", ".13", "v2.13"}) {
    EXPECT_FALSE(ParseTorchVersion(bad).ok()) << bad;
  }
}

TEST(PlatformFromInstanceType, TrainiumOnly) {
  EXPECT_THAT(PlatformFromInstanceType("trn2.48xlarge\n"),
              Optional(std::string("trn2")));
  EXPECT_THAT(PlatformFromInstanceType("trn3.48xlarge"),
              Optional(std::string("trn3")));
  EXPECT_THAT(PlatformFromInstanceType("trn2u.48xlarge"),
              Optional(std::string("trn2")));
  EXPECT_THAT(PlatformFromInstanceType("trn1n.32xlarge"),
              Optional(std::string("trn1")));
  for (absl::string_view other :
       {"", "m5.large", "inf2.xlarge", "Standard PC (Q35 + ICH9, 2009)",
        "trn.large", "trnX.large"}) {
    EXPECT_EQ(PlatformFromInstanceType(other), std::nullopt) << other;
  }
}

TEST(EditDistance, Levenshtein) {
  EXPECT_EQ(EditDistance("", ""), 0);
  EXPECT_EQ(EditDistance("abc", ""), 3);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3);
  EXPECT_EQ(EditDistance("TORCH_NEURONX_NEFF_CACHE_DIRR",
                         "TORCH_NEURONX_NEFF_CACHE_DIR"),
            1);
  EXPECT_EQ(EditDistance("ab", "ba"), 2);
}

}  // namespace
}  // namespace neffd::config::internal
