// Lock handover between real processes: a SIGKILLed holder is replaced within
// 2 s; a holder that is alive but silent keeps its lease for --lease_ttl and
// loses it then; a heartbeating holder keeps it.
#include <signal.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

class LockHandoffTest : public ::testing::Test {
 protected:
  void StartDaemon(std::vector<std::string> flags) {
    root_ = TestTempDir();
    daemon_ = std::make_unique<DaemonProcess>(root_, std::move(flags));
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
  }

  std::unique_ptr<Process> Holder(int heartbeat_ms, int wait_seconds = 0) {
    return std::make_unique<Process>(std::vector<std::string>{
        Runfile("tests/lock_holder"), "--address=" + daemon_->address(),
        "--key=feedface", absl::StrCat("--heartbeat_ms=", heartbeat_ms),
        absl::StrCat("--wait_seconds=", wait_seconds)});
  }

  // Waits until `p` printed `word`; returns when that was seen.
  absl::Time AwaitOutput(Process& p, const std::string& word,
                         absl::Duration limit = absl::Seconds(30)) {
    const absl::Time deadline = absl::Now() + limit;
    while (absl::Now() < deadline) {
      if (absl::StrContains(p.Stdout(), word)) return absl::Now();
      absl::SleepFor(absl::Milliseconds(5));
    }
    ADD_FAILURE() << "no '" << word << "' from pid " << p.pid() << ": "
                  << p.Stdout() << p.Stderr();
    return absl::InfiniteFuture();
  }

  std::string root_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(LockHandoffTest, KilledHolderIsReplacedWithinTwoSeconds) {
  StartDaemon({"--lease_ttl=60"});
  auto holder = Holder(/*heartbeat_ms=*/1000);
  AwaitOutput(*holder, "GRANTED");
  auto waiter = Holder(1000);
  ASSERT_TRUE(WaitUntil([&] { return LockWaiters(*daemon_) == 1; }))
      << "the waiter never parked";
  EXPECT_EQ(waiter->Stdout(), "");  // parked behind the holder

  const absl::Time killed = absl::Now();
  holder->Signal(SIGKILL);
  const absl::Time granted = AwaitOutput(*waiter, "GRANTED");
  EXPECT_LE(granted - killed, absl::Seconds(2));
}

TEST_F(LockHandoffTest, SilentHolderLosesTheLeaseAfterTtlNotBefore) {
  StartDaemon({"--lease_ttl=3"});
  auto holder = Holder(/*heartbeat_ms=*/0);  // alive, never renews
  const absl::Time holder_granted = AwaitOutput(*holder, "GRANTED");
  auto waiter = Holder(1000);
  const absl::Time waiter_granted = AwaitOutput(*waiter, "GRANTED");
  EXPECT_GE(waiter_granted - holder_granted, absl::Seconds(2.9));
  EXPECT_LE(waiter_granted - holder_granted, absl::Seconds(6));
  EXPECT_TRUE(holder->Running());
}

TEST_F(LockHandoffTest, HeartbeatingHolderKeepsTheLeasePastTheTtl) {
  StartDaemon({"--lease_ttl=2"});
  auto holder = Holder(/*heartbeat_ms=*/400);
  AwaitOutput(*holder, "GRANTED");
  auto waiter = Holder(400, /*wait_seconds=*/5);
  AwaitOutput(*waiter, "TIMED_OUT", absl::Seconds(15));
  EXPECT_FALSE(absl::StrContains(waiter->Stdout(), "GRANTED"));
}

}  // namespace
}  // namespace neffd::test_support
