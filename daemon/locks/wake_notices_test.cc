#include "daemon/locks/wake_notices.h"

#include <sys/stat.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "store/testing/manual_clock_env.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

EntryKey Key(const std::string& key) {
  return *EntryKey::Parse("neff", "2.19.1", key);
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

class WakeNoticesTest : public ::testing::Test {
 protected:
  const std::string dir_ = test_support::TestTempDir();
  ManualClockEnv env_{absl::FromUnixSeconds(1800000000)};
  WakeNotices notices_{&env_, dir_, absl::Seconds(30)};
};

TEST_F(WakeNoticesTest, AKeyHasOneOpenNoticeUntilItIsAnswered) {
  absl::StatusOr<WakeNotices::Notice> first = notices_.Join(Key("aaa"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(*notices_.Join(Key("aaa")), *first) << "joined, not created";
  EXPECT_NE(*notices_.Join(Key("bbb")), *first) << "another key's own";
  notices_.Answer(Key("aaa"), *first, "READY");
  absl::StatusOr<WakeNotices::Notice> next = notices_.Join(Key("aaa"));
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_NE(*next, *first) << "parked after the answer: a new notice";
  EXPECT_NE((*next)->path(), (*first)->path()) << "never a reused name";
}

TEST_F(WakeNoticesTest, AnAnsweredNoticeStaysForLateReadersThenGoes) {
  std::string path;
  {
    WakeNotices::Notice notice = *notices_.Join(Key("aaa"));
    path = notice->path();
    notices_.Answer(Key("aaa"), notice, "the answer");
  }  // every caller on it was answered: only the board keeps it
  absl::StatusOr<WakeWait> late = WaitForNotice(
      &env_, path, env_.MonotonicNow() + absl::Seconds(1), absl::Seconds(1));
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->answer, "the answer");
  env_.Advance(absl::Seconds(31));
  // The next answer lets go of the expired ones.
  WakeNotices::Notice other = *notices_.Join(Key("bbb"));
  notices_.Answer(Key("bbb"), other, "");
  EXPECT_FALSE(Exists(path)) << "kept 30 s, not for ever";
  EXPECT_TRUE(Exists(other->path()));
}

TEST_F(WakeNoticesTest, AnEarlierDaemonsNoticesAreRemovedAtStart) {
  std::ofstream(dir_ + "/123.4") << "left by a daemon that died";
  ASSERT_TRUE(notices_.RemoveLeftovers().ok());
  EXPECT_FALSE(Exists(dir_ + "/123.4"));
}

}  // namespace
}  // namespace neffd
