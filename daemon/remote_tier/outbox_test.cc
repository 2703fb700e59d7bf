#include "daemon/remote_tier/outbox.h"

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

class OutboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_support::NewTempDir("outbox");
    index_ = *Index::Open(dir_);
  }
  std::function<absl::Time()> Clock() {
    return [this] { return now_; };
  }
  void Reopen() {
    index_.reset();
    index_ = *Index::Open(dir_);
  }

  std::string dir_;
  std::unique_ptr<Index> index_;
  absl::Time now_ = absl::FromUnixSeconds(1'800'000'000);
};

TEST_F(OutboxTest, QueuedEntriesSurviveReopenAndAreDueAtOnce) {
  const EntryKey a = *EntryKey::Parse("neff", "2.19", "a");
  const EntryKey b = *EntryKey::Parse("neff", "2.19", "b");
  {
    Outbox outbox(index_.get(), Clock());
    ASSERT_TRUE(outbox.Add(a, 10, "aa").ok());
    now_ += absl::Seconds(1);
    ASSERT_TRUE(outbox.Add(b, 20, "bb").ok());
    outbox.Done(a);
  }
  Reopen();
  now_ += absl::Minutes(2);
  Outbox outbox(index_.get(), Clock());
  EXPECT_EQ(outbox.size(), 1u);
  std::optional<OutboxItem> due = outbox.NextDue();
  ASSERT_TRUE(due.has_value());
  EXPECT_EQ(due->id, b);
  EXPECT_EQ(due->record.size(), 20u);
  EXPECT_EQ(due->record.sha256(), "bb");
  EXPECT_EQ(outbox.OldestAge(), absl::Minutes(2));
}

TEST_F(OutboxTest, FailuresBackOffDoublingUpToFiveMinutes) {
  const EntryKey a = *EntryKey::Parse("neff", "2.19", "a");
  Outbox outbox(index_.get(), Clock());
  ASSERT_TRUE(outbox.Add(a, 10, "aa").ok());
  absl::Duration expected = absl::Seconds(1);
  for (int failure = 1; failure <= 12; ++failure) {
    outbox.Retry(a, absl::InfinitePast(), /*count_failure=*/true);
    EXPECT_FALSE(outbox.NextDue().has_value()) << failure;
    EXPECT_EQ(outbox.NextDueTime() - now_, expected) << failure;
    now_ = outbox.NextDueTime();
    EXPECT_TRUE(outbox.NextDue().has_value()) << failure;
    expected = std::min(expected * 2, absl::Minutes(5));
  }
  // A call the breaker skipped waits for the breaker, not a longer backoff.
  outbox.Retry(a, now_ + absl::Seconds(42), /*count_failure=*/false);
  EXPECT_EQ(outbox.NextDueTime() - now_, absl::Seconds(42));
}

}  // namespace
}  // namespace neffd
