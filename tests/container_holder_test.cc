// Issue 18, part 2: a lease lives as long as its holder's connection. A rank
// in its own UTS and pid namespace (a pod: another hostname, a pid the daemon
// cannot see in /proc) that is SIGKILLed mid-compile is replaced at once, not
// after the lease TTL; a holder that is alive but stopped keeps its lease for
// the TTL and not longer. Needs root for unshare (CI runs as root): a
// non-root run fails.
#include <signal.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"
#include "tests/rank_fleet.h"

namespace neffd::test_support {
namespace {

constexpr char kPodHost[] = "pod-7f9c";

class ContainerHolderTest : public ::testing::Test {
 protected:
  void StartDaemon(std::vector<std::string> flags) {
    root_ = TestTempDir();
    daemon_ = std::make_unique<DaemonProcess>(root_, std::move(flags));
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
  }

  // True once a lease is out whose holder says `host`, with `waiters`
  // parked behind it.
  bool LeaseOut(const std::string& host, uint64_t waiters) {
    v1::LocksResponse locks = GetLocks(*daemon_);
    for (const v1::LeaseInfo& lease : locks.leases()) {
      if (lease.holder().host() == host && locks.waiters() == waiters) {
        return true;
      }
    }
    return false;
  }

  std::string root_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(ContainerHolderTest, RankKilledInItsOwnPidAndUtsNamespaceIsReplaced) {
  ASSERT_EQ(geteuid(), 0u) << "unshare --pid --uts needs root (CI runs as "
                              "root); this test fails rather than skips";
  // The TTL is far longer than the bound: only the broken connection can
  // hand the key on in time.
  StartDaemon({"--lease_ttl=60"});
  RankFleet fleet(root_, daemon_->address());
  std::vector<std::string> pod = {
      "/usr/bin/unshare",
      "--uts",
      "--pid",
      "--fork",
      "--kill-child",
      "--",
      "/bin/sh",
      "-c",
      absl::StrCat("hostname ", kPodHost, " && exec \"$0\" \"$@\"")};
  for (const std::string& arg :
       RankSimCommand(fleet.compile_log(), 1, /*compile_ms=*/600000)) {
    pod.push_back(arg);
  }
  Process& holder = fleet.StartOne(0, pod);
  ASSERT_TRUE(
      PollUntil([&] { return LeaseOut(kPodHost, 0); }, absl::Seconds(30)))
      << holder.Stdout() << holder.Stderr();
  Process& heir =
      fleet.StartOne(1, RankSimCommand(fleet.compile_log(), 1, 100));
  ASSERT_TRUE(
      PollUntil([&] { return LeaseOut(kPodHost, 1); }, absl::Seconds(30)))
      << heir.Stdout() << heir.Stderr();

  const absl::Time killed = absl::Now();
  holder.Signal(SIGKILL);  // unshare --kill-child SIGKILLs the rank in the pod
  const int heir_exit = heir.Wait();
  const absl::Duration replaced = absl::Now() - killed;
  EXPECT_EQ(heir_exit, 0) << heir.Stdout() << heir.Stderr();
  EXPECT_TRUE(absl::StartsWith(heir.Stdout(), "OK 0 ")) << heir.Stdout();
  EXPECT_LE(replaced, absl::Seconds(2));
  std::printf("killed pod holder replaced and entry published in %.0f ms\n",
              absl::ToDoubleMilliseconds(replaced));
  RecordProperty("replaced_ms",
                 static_cast<int>(absl::ToInt64Milliseconds(replaced)));
  holder.Wait();
  fleet.WaitAll();
}

TEST_F(ContainerHolderTest, StoppedHolderKeepsItsLeaseForTheTtlAndNoLonger) {
  StartDaemon({"--lease_ttl=3"});
  auto holder_command = [&](const std::string& host) {
    return std::vector<std::string>{Runfile("tests/lock_holder"),
                                    "--address=" + daemon_->address(),
                                    "--key=stopped",
                                    "--host=" + host,
                                    "--hold_stream",
                                    "--heartbeat_ms=200"};
  };
  Process holder(holder_command(kPodHost));
  ASSERT_TRUE(
      PollUntil([&] { return absl::StartsWith(holder.Stdout(), "GRANTED"); },
                absl::Seconds(30)))
      << holder.Stderr();
  Process waiter(holder_command("waiter"));
  ASSERT_TRUE(
      PollUntil([&] { return LeaseOut(kPodHost, 1); }, absl::Seconds(30)));

  const absl::Time stopped = absl::Now();
  holder.Signal(SIGSTOP);
  ASSERT_TRUE(
      PollUntil([&] { return absl::StartsWith(waiter.Stdout(), "GRANTED"); },
                absl::Seconds(30)))
      << waiter.Stderr();
  const absl::Duration kept = absl::Now() - stopped;
  // Its last renewal was at most one heartbeat (200 ms) before the stop;
  // the table ticks every 100 ms.
  EXPECT_GE(kept, absl::Seconds(3) - absl::Milliseconds(300));
  EXPECT_LE(kept, absl::Seconds(3) + absl::Seconds(1));
  std::printf("stopped holder kept its lease %.0f ms (TTL 3000 ms)\n",
              absl::ToDoubleMilliseconds(kept));
  RecordProperty("kept_ms", static_cast<int>(absl::ToInt64Milliseconds(kept)));
  // Woken up, the holder hears that its lease is gone.
  holder.Signal(SIGCONT);
  EXPECT_TRUE(
      PollUntil([&] { return absl::StrContains(holder.Stdout(), "LOST"); },
                absl::Seconds(10)))
      << holder.Stdout();
  holder.Signal(SIGKILL);
  waiter.Signal(SIGKILL);
}

}  // namespace
}  // namespace neffd::test_support
