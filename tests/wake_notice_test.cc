// Ranks parked on a wake notice (store/wake_notice.h) against a real neffd:
// the Lock that allows it is answered PARKED with one notice per key, in the
// local dir's wake/ (0440: the ranks' group reads, only the daemon writes);
// the holder's publish answers every waiter on it READY with the entry at
// once; an abandoned lease tells them to ask again, and one is granted; a
// daemon killed under them is seen as gone. The stub calls are what the
// client library sends (client/daemon_backend.cc), and the waits are its
// own WaitForNotice.
#include "store/wake_notice.h"

#include <signal.h>
#include <sys/stat.h>

#include <string>
#include <thread>

#include "absl/strings/match.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

v1::EntryId Id(const std::string& key) {
  v1::EntryId id;
  id.set_namespace_("neff");
  id.set_compiler_version("2.19.1");
  id.set_key(key);
  return id;
}

absl::Duration In(absl::Duration d) {
  return Env::Default()->MonotonicNow() + d;
}

class WakeNoticeDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    daemon_ = std::make_unique<DaemonProcess>(TestTempDir());
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
    stub_ = daemon_->NewStub();
  }

  v1::LockResponse Lock(const std::string& key, bool wake_file,
                        bool look_up = false) {
    LockCall call;
    call.wait_seconds = 60;
    call.look_up = look_up;
    call.wake_file = wake_file;
    absl::StatusOr<v1::LockResponse> response = CallLock(*stub_, Id(key), call);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.value_or(v1::LockResponse());
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::CompileCache::Stub> stub_;
};

TEST_F(WakeNoticeDaemonTest, ParkedRanksShareOneNoticeAnsweredReadyAtOnce) {
  v1::LockResponse holder = Lock("abc123", /*wake_file=*/true, true);
  ASSERT_EQ(holder.outcome(), v1::LockResponse::GRANTED)
      << "a free key is granted, not parked";
  v1::LockResponse first = Lock("abc123", true, true);
  v1::LockResponse second = Lock("abc123", true, true);
  ASSERT_EQ(first.outcome(), v1::LockResponse::PARKED);
  ASSERT_EQ(second.outcome(), v1::LockResponse::PARKED);
  EXPECT_EQ(first.wake_file(), second.wake_file()) << "one notice per key";
  EXPECT_TRUE(
      absl::StartsWith(first.wake_file(), daemon_->local_dir() + "/wake/"))
      << first.wake_file();
  struct stat st;
  ASSERT_EQ(stat(first.wake_file().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0440u);
  // Still waiters to an operator, as parked calls are.
  EXPECT_EQ(LockWaiters(*daemon_), 2u);
  // Nothing is published yet: a wait on the notice ends at its deadline.
  absl::StatusOr<WakeWait> none =
      WaitForNotice(Env::Default(), first.wake_file(),
                    In(absl::Milliseconds(200)), absl::Milliseconds(50));
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->end, WakeWait::End::kTimedOut) << "nothing published yet";

  absl::StatusOr<WakeWait> woke;
  std::thread waiter([&] {
    woke = WaitForNotice(Env::Default(), first.wake_file(),
                         In(absl::Seconds(60)), absl::Seconds(1));
  });
  ASSERT_TRUE(
      PublishHeld(*stub_, holder.lease().lease_id(), Id("abc123"), "NEFF bytes")
          .ok());
  waiter.join();
  ASSERT_TRUE(woke.ok()) << woke.status();
  ASSERT_EQ(woke->end, WakeWait::End::kAnswered);
  v1::LockResponse answer;
  ASSERT_TRUE(answer.ParseFromString(woke->answer));
  EXPECT_EQ(answer.outcome(), v1::LockResponse::READY);
  EXPECT_EQ(answer.entry().size(), 10u);
  EXPECT_EQ(stat(answer.entry().path().c_str(), &st), 0)
      << answer.entry().path();
  // A rank that opens the notice late still reads the answer.
  absl::StatusOr<WakeWait> late =
      WaitForNotice(Env::Default(), second.wake_file(), In(absl::Seconds(5)),
                    absl::Seconds(1));
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->answer, woke->answer);

  v1::Stats stats = StatsOf(*daemon_);
  EXPECT_EQ(stats.lookups(), 3u);
  EXPECT_EQ(stats.misses(), 3u);
  EXPECT_EQ(stats.compiles_saved(), 2u) << "each parked rank, once";
  EXPECT_EQ(LockWaiters(*daemon_), 0u);
  EXPECT_EQ(Lock("abc123", true).outcome(), v1::LockResponse::READY)
      << "published: answered at once, never parked";
}

TEST_F(WakeNoticeDaemonTest,
       AnAbandonedLeaseSendsTheParkedBackAndOneIsGranted) {
  v1::LockResponse holder = Lock("def456", true);
  ASSERT_EQ(holder.outcome(), v1::LockResponse::GRANTED);
  v1::LockResponse parked = Lock("def456", true);
  ASSERT_EQ(parked.outcome(), v1::LockResponse::PARKED);
  v1::UnlockRequest unlock;
  unlock.set_lease_id(holder.lease().lease_id());
  *unlock.mutable_id() = Id("def456");
  unlock.set_outcome(v1::UnlockRequest::ABANDONED);
  v1::UnlockResponse unlocked;
  grpc::ClientContext context;
  ASSERT_TRUE(stub_->Unlock(&context, unlock, &unlocked).ok());
  absl::StatusOr<WakeWait> woke =
      WaitForNotice(Env::Default(), parked.wake_file(), In(absl::Seconds(30)),
                    absl::Seconds(1));
  ASSERT_TRUE(woke.ok()) << woke.status();
  EXPECT_EQ(woke->end, WakeWait::End::kAnswered);
  EXPECT_EQ(woke->answer, "") << "ask again";
  EXPECT_EQ(Lock("def456", true).outcome(), v1::LockResponse::GRANTED);
}

TEST_F(WakeNoticeDaemonTest, ADaemonKilledUnderParkedRanksIsSeenAsGone) {
  ASSERT_EQ(Lock("fed789", true).outcome(), v1::LockResponse::GRANTED);
  v1::LockResponse parked = Lock("fed789", true);
  ASSERT_EQ(parked.outcome(), v1::LockResponse::PARKED);
  absl::StatusOr<WakeWait> woke;
  std::thread waiter([&] {
    woke = WaitForNotice(Env::Default(), parked.wake_file(),
                         In(absl::Seconds(60)), absl::Milliseconds(100));
  });
  daemon_->Signal(SIGKILL);
  waiter.join();
  ASSERT_TRUE(woke.ok()) << woke.status();
  EXPECT_EQ(woke->end, WakeWait::End::kAbandoned);
}

}  // namespace
}  // namespace neffd::test_support
