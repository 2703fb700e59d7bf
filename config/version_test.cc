#include "config/version.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/ascii.h"
#include "gtest/gtest.h"

namespace neffd::config {
namespace {

// The constant is the VERSION file, not a copy that could drift from it.
TEST(VersionTest, IsTheVersionFile) {
  std::ifstream in("VERSION");
  ASSERT_TRUE(in) << "VERSION is not in the test's runfiles";
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(Version(), absl::StripAsciiWhitespace(text.str()));
  EXPECT_FALSE(Version().empty());
  EXPECT_EQ(VersionLine("neffd"), "neffd " + std::string(Version()));
}

TEST(VersionTest, AsksForVersion) {
  EXPECT_TRUE(AsksForVersion({"neffd", "--version"}));
  EXPECT_TRUE(AsksForVersion({"neffctl", "-version"}));
  EXPECT_TRUE(AsksForVersion({"neffd", "--address=unix:/x", "--version"}));
  EXPECT_FALSE(AsksForVersion({"neffd"}));
  EXPECT_FALSE(AsksForVersion({"neffctl", "--", "--version"}));
  EXPECT_FALSE(AsksForVersion({"neffctl", "--versions"}));
}

}  // namespace
}  // namespace neffd::config
