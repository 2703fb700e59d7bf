#include "daemon/remote_tier/outbox.h"

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "store/testing/manual_clock_env.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

class OutboxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test_support::NewTempDir("outbox");
    index_ = *Index::Open(dir_);
  }
  OutboxOptions Options() {
    OutboxOptions options;
    options.env = &clock_;
    options.absent_grace = absl::Minutes(10);
    return options;
  }
  // The outbox a daemon would open after a restart (or a SIGKILL).
  std::unique_ptr<Outbox> Reopen(std::unique_ptr<Outbox> outbox) {
    outbox.reset();
    index_.reset();
    index_ = *Index::Open(dir_);
    return std::make_unique<Outbox>(index_.get(), Options());
  }
  // A publish that stored the entry.
  static void Published(Outbox& outbox, const EntryKey& id, uint64_t size,
                        const std::string& sha256) {
    absl::StatusOr<OutboxTicket> ticket = outbox.BeginPublish(id, size, sha256);
    ASSERT_TRUE(ticket.ok()) << ticket.status();
    outbox.EndPublish(id, *ticket, /*stored=*/true);
  }

  const EntryKey a_ = *EntryKey::Parse("neff", "2.19", "a");
  const EntryKey b_ = *EntryKey::Parse("neff", "2.19", "b");
  std::string dir_;
  std::unique_ptr<Index> index_;
  ManualClockEnv clock_{absl::FromUnixSeconds(1'800'000'000)};
};

TEST_F(OutboxTest, QueuedEntriesSurviveReopenAndAreDueAtOnce) {
  auto outbox = std::make_unique<Outbox>(index_.get(), Options());
  Published(*outbox, a_, 10, "aa");
  clock_.Advance(absl::Seconds(1));
  Published(*outbox, b_, 20, "bb");
  std::optional<OutboxItem> first = outbox->NextDue();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->id, a_);
  outbox->Done(*first);
  outbox = Reopen(std::move(outbox));
  clock_.Advance(absl::Minutes(2));
  EXPECT_EQ(outbox->size(), 1u);
  std::optional<OutboxItem> due = outbox->NextDue();
  ASSERT_TRUE(due.has_value());
  EXPECT_EQ(due->id, b_);
  EXPECT_EQ(due->record.size(), 20u);
  EXPECT_EQ(due->record.sha256(), "bb");
  EXPECT_FALSE(due->committed);
  EXPECT_EQ(outbox->OldestAge(), absl::Minutes(2));
}

TEST_F(OutboxTest, FailuresBackOffDoublingUpToFiveMinutes) {
  Outbox outbox(index_.get(), Options());
  Published(outbox, a_, 10, "aa");
  absl::Duration expected = absl::Seconds(1);
  for (int failure = 1; failure <= 12; ++failure) {
    std::optional<OutboxItem> item = outbox.NextDue();
    ASSERT_TRUE(item.has_value()) << failure;
    outbox.Retry(*item, absl::InfinitePast(), /*count_failure=*/true);
    EXPECT_FALSE(outbox.NextDue().has_value()) << failure;
    EXPECT_EQ(outbox.NextDueTime() - clock_.Now(), expected) << failure;
    clock_.Set(outbox.NextDueTime());
    expected = std::min(expected * 2, absl::Minutes(5));
  }
  // A call the breaker skipped waits for the breaker, not a longer backoff.
  outbox.Retry(*outbox.NextDue(), clock_.Now() + absl::Seconds(42),
               /*count_failure=*/false);
  EXPECT_EQ(outbox.NextDueTime() - clock_.Now(), absl::Seconds(42));
}

// The row is the publish's intent: on disk before the store commits, so
// a crash mid-publish leaves it; never due while the publish runs.
TEST_F(OutboxTest, RowIsDurableBeforeThePublishEndsAndNotDueMeanwhile) {
  auto outbox = std::make_unique<Outbox>(index_.get(), Options());
  ASSERT_TRUE(outbox->BeginPublish(a_, 10, "aa").ok());
  EXPECT_EQ(outbox->size(), 1u);
  EXPECT_FALSE(outbox->NextDue().has_value());
  EXPECT_EQ(outbox->NextDueTime(), absl::InfiniteFuture());
  // The daemon dies before the publish ends.
  outbox = Reopen(std::move(outbox));
  std::optional<OutboxItem> due = outbox->NextDue();
  ASSERT_TRUE(due.has_value());
  EXPECT_EQ(due->id, a_);
  EXPECT_EQ(due->record.sha256(), "aa");
}

TEST_F(OutboxTest, RefusedPublishLeavesNoRowButKeepsOneQueuedBefore) {
  auto outbox = std::make_unique<Outbox>(index_.get(), Options());
  absl::StatusOr<OutboxTicket> refused = outbox->BeginPublish(a_, 10, "aa");
  ASSERT_TRUE(refused.ok());
  outbox->EndPublish(a_, *refused, /*stored=*/false);
  EXPECT_EQ(outbox->size(), 0u);
  // b is queued (its upload failed once); a second publish of b that finds
  // it cached must not take the row with it.
  Published(*outbox, b_, 20, "bb");
  outbox->Retry(*outbox->NextDue(), absl::InfinitePast(), true);
  absl::StatusOr<OutboxTicket> again = outbox->BeginPublish(b_, 20, "bb");
  ASSERT_TRUE(again.ok());
  outbox->EndPublish(b_, *again, /*stored=*/false);
  EXPECT_EQ(outbox->size(), 1u);
  outbox = Reopen(std::move(outbox));
  EXPECT_EQ(outbox->size(), 1u);
  ASSERT_TRUE(outbox->NextDue().has_value());
  EXPECT_EQ(outbox->NextDue()->id, b_);
}

TEST_F(OutboxTest, AbsentEntryGoesAtOnceIfSeenCommittedElseAfterTheGrace) {
  auto outbox = std::make_unique<Outbox>(index_.get(), Options());
  Published(*outbox, a_, 10, "aa");
  std::optional<OutboxItem> a = outbox->NextDue();
  ASSERT_TRUE(a.has_value() && a->committed);
  EXPECT_TRUE(outbox->Absent(*a)) << "evicted after its commit: dropped";
  EXPECT_EQ(outbox->size(), 0u);

  ASSERT_TRUE(outbox->BeginPublish(b_, 20, "bb").ok());
  outbox = Reopen(std::move(outbox));  // died mid-publish
  int deferrals = 0;
  for (;;) {
    std::optional<OutboxItem> b = outbox->NextDue();
    ASSERT_TRUE(b.has_value());
    ASSERT_FALSE(b->committed);
    if (outbox->Absent(*b)) break;
    ++deferrals;
    EXPECT_LT(clock_.Now() - absl::FromUnixSeconds(1'800'000'000),
              absl::Minutes(10));
    clock_.Set(outbox->NextDueTime());
  }
  EXPECT_GE(clock_.Now() - absl::FromUnixSeconds(1'800'000'000),
            absl::Minutes(10));
  EXPECT_EQ(deferrals, 10);  // at 0, 1, 3, ... 511 s; gone at 811 s
  EXPECT_EQ(outbox->size(), 0u);
  outbox = Reopen(std::move(outbox));
  EXPECT_EQ(outbox->size(), 0u);
}

// An upload's result about a row a new publish has begun since is stale:
// the row stays for the new publish.
TEST_F(OutboxTest, ResultsForARowPublishedAgainAreIgnored) {
  Outbox outbox(index_.get(), Options());
  Published(outbox, a_, 10, "aa");
  std::optional<OutboxItem> taken = outbox.NextDue();
  ASSERT_TRUE(taken.has_value());
  absl::StatusOr<OutboxTicket> again = outbox.BeginPublish(a_, 10, "aa");
  ASSERT_TRUE(again.ok());
  outbox.Done(*taken);
  EXPECT_FALSE(outbox.Absent(*taken));
  EXPECT_EQ(outbox.size(), 1u);
  outbox.EndPublish(a_, *again, /*stored=*/true);
  std::optional<OutboxItem> due = outbox.NextDue();
  ASSERT_TRUE(due.has_value());
  EXPECT_TRUE(due->committed);
  outbox.Done(*due);
  EXPECT_EQ(outbox.size(), 0u);
}

}  // namespace
}  // namespace neffd
