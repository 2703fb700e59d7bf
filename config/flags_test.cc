// The flag types and checks as a user of neffd or neffctl meets them: what
// a flag accepts, the one line a bad one gets, and the help entry.
#include "config/flags.h"

#include <optional>

#include "absl/flags/flag.h"
#include "absl/strings/match.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

ABSL_FLAG(neffd::config::DurationFlag, test_ttl,
          neffd::config::DurationFlag{absl::Seconds(30)}, "a test duration");
ABSL_FLAG(std::optional<neffd::config::LogLevelFlag>, test_level, std::nullopt,
          "a test level");
ABSL_FLAG(uint64_t, test_bytes, 0, "a test size");
ABSL_FLAG(bool, test_switch, false, "a test bool");
ABSL_FLAG(std::string, test_dir, "", "a test dir");

namespace neffd::config {
namespace {

absl::Duration Parsed(absl::string_view text) {
  DurationFlag flag;
  std::string error;
  EXPECT_TRUE(AbslParseFlag(text, &flag, &error)) << text;
  return flag.value;
}

TEST(DurationFlagTest, TakesBareSecondsAndAbslDurations) {
  EXPECT_EQ(Parsed("30"), absl::Seconds(30));
  EXPECT_EQ(Parsed("0.2"), absl::Milliseconds(200));
  EXPECT_EQ(Parsed("30s"), absl::Seconds(30));
  EXPECT_EQ(Parsed("1m30s"), absl::Seconds(90));
  EXPECT_EQ(Parsed("250ms"), absl::Milliseconds(250));
  EXPECT_EQ(Parsed("-1"), absl::Seconds(-1));
  EXPECT_EQ(Parsed("inf"), absl::InfiniteDuration());
  EXPECT_EQ(Parsed("7d"), absl::Hours(168));
  EXPECT_EQ(Parsed("0.5d"), absl::Hours(12));
  for (absl::string_view bad : {"", "abc", "30x", "nan", "d", "xd", "infd"}) {
    DurationFlag flag;
    std::string error;
    EXPECT_FALSE(AbslParseFlag(bad, &flag, &error)) << bad;
  }
  EXPECT_EQ(AbslUnparseFlag(DurationFlag{absl::Seconds(90)}), "1m30s");
}

uint64_t Bytes(absl::string_view text) {
  ByteSizeFlag flag;
  std::string error;
  EXPECT_TRUE(AbslParseFlag(text, &flag, &error)) << text;
  return flag.bytes;
}

TEST(ByteSizeFlagTest, TakesBytesAndBinaryUnits) {
  EXPECT_EQ(Bytes("1048576"), uint64_t{1} << 20);
  EXPECT_EQ(Bytes("18446744073709551615"), ~uint64_t{0});
  EXPECT_EQ(Bytes("512B"), 512u);
  EXPECT_EQ(Bytes("4GiB"), uint64_t{4} << 30);
  EXPECT_EQ(Bytes("4G"), uint64_t{4} << 30);
  EXPECT_EQ(Bytes("4gb"), uint64_t{4} << 30);
  EXPECT_EQ(Bytes("1.5KiB"), 1536u);
  EXPECT_EQ(Bytes(" 2T "), uint64_t{2} << 40);
  for (absl::string_view bad :
       {"", "lots", "4X", "-1", "-1G", "GiB", "nan", "inf", "16384P"}) {
    ByteSizeFlag flag;
    std::string error;
    EXPECT_FALSE(AbslParseFlag(bad, &flag, &error)) << bad;
    EXPECT_EQ(error, "is not a size") << bad;
  }
  // Shown in the largest exact unit, so that it parses back the same.
  for (uint64_t bytes : {uint64_t{0}, uint64_t{1000}, uint64_t{4} << 30,
                         uint64_t{1536}, uint64_t{3} << 20, ~uint64_t{0}}) {
    const std::string shown = AbslUnparseFlag(ByteSizeFlag{bytes});
    EXPECT_EQ(Bytes(shown), bytes) << shown;
  }
  EXPECT_EQ(AbslUnparseFlag(ByteSizeFlag{uint64_t{4} << 30}), "4GiB");
  EXPECT_EQ(AbslUnparseFlag(ByteSizeFlag{1000}), "1000");
  EXPECT_EQ(AbslUnparseFlag(ByteSizeFlag{1536}), "1536");
}

TEST(LogLevelFlagTest, TakesNumbersAndNames) {
  for (auto [text, level] : {std::pair{"0", 0},
                             {"3", 3},
                             {"info", 2},
                             {"WARNING", 1},
                             {"debug", 3}}) {
    LogLevelFlag flag;
    std::string error;
    ASSERT_TRUE(AbslParseFlag(text, &flag, &error)) << text;
    EXPECT_EQ(flag.level, level) << text;
  }
  LogLevelFlag flag;
  std::string error;
  EXPECT_FALSE(AbslParseFlag("4", &flag, &error));
  EXPECT_FALSE(AbslParseFlag("loud", &flag, &error));
}

TEST(CheckFlagsTest, OneLineNamingEachBadFlag) {
  const std::vector<std::string> errors =
      CheckFlags({"prog", "--test_ttl=abc", "--test_bytes", "-5", "--nosuch=1",
                  "--test_switch", "--notest_switch", "--test_level=loud",
                  "--test_dir", "/x", "positional", "--", "--after_the_end=1"});
  ASSERT_EQ(errors.size(), 4u) << absl::StrJoin(errors, "\n");
  EXPECT_EQ(errors[0],
            "--test_ttl: \"abc\" is not a duration (seconds, or e.g. 30s, "
            "5m, 1h, 7d)");
  EXPECT_EQ(errors[1], "--test_bytes: \"-5\" is not a whole number >= 0");
  EXPECT_EQ(errors[2], "--nosuch: no such flag");
  EXPECT_TRUE(absl::StartsWith(errors[3], "--test_level: \"loud\" is not"));
  EXPECT_EQ(CheckFlags({"prog", "--test_dir"}),
            std::vector<std::string>{"--test_dir: needs a value"});
}

TEST(CheckFlagsTest, ChecksWithoutChangingTheFlags) {
  EXPECT_TRUE(CheckFlags({"prog", "--test_ttl=5m"}).empty());
  EXPECT_EQ(absl::GetFlag(FLAGS_test_ttl).value, absl::Seconds(30));
}

TEST(AsksForHelpTest, HelpFlagsBeforeTheEndOfFlags) {
  EXPECT_TRUE(AsksForHelp({"prog", "--help"}));
  EXPECT_TRUE(AsksForHelp({"prog", "stats", "-h"}));
  EXPECT_FALSE(AsksForHelp({"prog", "--", "--help"}));
  EXPECT_FALSE(AsksForHelp({"prog", "stats"}));
}

TEST(FlagsHelpTest, ListsDefaultsAndVariables) {
  const std::string help =
      FlagsHelp("config/", [](absl::string_view flag) -> std::string {
        return flag == "test_dir" ? "TORCH_NEURONX_NEFF_CACHE_DIR" : "";
      });
  EXPECT_TRUE(absl::StrContains(
      help, "  --test_ttl=DURATION\n      a test duration (default: 30s)\n"))
      << help;
  // Shown with its variable and the variable's default from the registry.
  EXPECT_TRUE(absl::StrContains(help, "  --test_dir=VALUE\n      a test dir"))
      << help;
  EXPECT_TRUE(absl::StrContains(help, "$TORCH_NEURONX_NEFF_CACHE_DIR, else"))
      << help;
  EXPECT_TRUE(absl::StrContains(help, "/tmp/neff_cache)\n")) << help;
  for (absl::string_view line : absl::StrSplit(help, '\n')) {
    EXPECT_LE(line.size(), 78u) << line;
  }
  EXPECT_TRUE(absl::StrContains(help, "  --test_switch\n")) << help;
  EXPECT_TRUE(absl::StrContains(help, "--test_level=LEVEL")) << help;
  EXPECT_FALSE(absl::StrContains(help, "--flagfile")) << help;  // absl's own
}

}  // namespace
}  // namespace neffd::config
