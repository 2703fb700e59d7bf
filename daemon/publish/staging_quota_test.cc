// The staging directory's per-uid quota (issue 19): one user's ranks cannot
// fill the local disk others stage on. Files of another owner need root
// (chown); CI runs as root.
#include "daemon/publish/staging_quota.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "store/testing/manual_clock_env.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

class StagingQuotaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(geteuid(), 0u) << "needs root (chown); CI runs as root";
    dir_ = test_support::TestTempDir();
  }

  // A staged file of `bytes` owned by `uid`, last written `age` ago.
  std::string Stage(const std::string& name, uid_t uid, size_t bytes,
                    absl::Duration age) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << std::string(bytes, 'x');
    EXPECT_EQ(chown(path.c_str(), uid, uid), 0);
    const absl::Time when = clock_.Now() - age;
    const struct timespec times[2] = {absl::ToTimespec(when),
                                      absl::ToTimespec(when)};
    EXPECT_EQ(utimensat(AT_FDCWD, path.c_str(), times, 0), 0);
    return path;
  }

  StagingQuota Quota(uint64_t bytes) {
    return StagingQuota({dir_, bytes, absl::Hours(1), &clock_});
  }

  std::string dir_;
  ManualClockEnv clock_{absl::Now()};
};

TEST_F(StagingQuotaTest, AUserOverItsQuotaIsRefusedAndOthersAreNot) {
  Stage("a1", 1001, 600, absl::Seconds(3));
  const std::string a2 = Stage("a2", 1001, 600, absl::Seconds(1));
  const std::string b1 = Stage("b1", 1002, 600, absl::Seconds(1));
  absl::Status refused = Quota(1000).Check(a2);
  EXPECT_TRUE(absl::IsResourceExhausted(refused)) << refused;
  EXPECT_TRUE(absl::StrContains(refused.message(), "--staging_quota_per_uid"))
      << refused;
  EXPECT_TRUE(Quota(1000).Check(b1).ok());
  EXPECT_TRUE(Quota(0).Check(a2).ok());  // no quota
}

TEST_F(StagingQuotaTest, SweepRemovesTheOldestOverQuotaAndTheAbandoned) {
  Stage("a-old", 1001, 600, absl::Seconds(30));
  Stage("a-new", 1001, 600, absl::Seconds(1));
  Stage("b-live", 1002, 600, absl::Seconds(1));
  Stage("c-abandoned", 1003, 10, absl::Hours(2));
  std::vector<std::string> removed = Quota(1000).Sweep();
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{"a-old", "c-abandoned"}));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/a-new"));
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/b-live"));
}

}  // namespace
}  // namespace neffd
