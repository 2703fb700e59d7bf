// Several real daemons on one machine, each a "host" with its own local dir,
// index, socket and --host_id, sharing one store directory: cross-host
// exclusion through lease files, takeover after a daemon dies, and immunity
// to clock skew (one daemon under libfaketime).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "store/lock_paths.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

constexpr int kLeaseTtlSeconds = 3;
constexpr double kPollSeconds = 0.5;

class MultiHostTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = TestTempDir(); }

  std::unique_ptr<DaemonProcess> Host(const std::string& name,
                                      std::vector<std::string> env = {}) {
    auto daemon = std::make_unique<DaemonProcess>(
        absl::StrCat(root_, "/", name),
        std::vector<std::string>{
            "--cache_dir=" + root_ + "/shared/neff",
            "--hlo_cache_dir=" + root_ + "/shared/hlo", "--host_id=" + name,
            absl::StrCat("--lease_ttl=", kLeaseTtlSeconds),
            absl::StrCat("--poll_interval=", kPollSeconds)},
        std::move(env));
    EXPECT_TRUE(daemon->Start()) << daemon->process().Stderr();
    return daemon;
  }

  std::unique_ptr<Process> Holder(const DaemonProcess& daemon,
                                  const std::string& host) {
    return std::make_unique<Process>(std::vector<std::string>{
        Runfile("tests/lock_holder"), "--address=" + daemon.address(),
        "--key=beef01", "--host=" + host, "--heartbeat_ms=500"});
  }

  static absl::Time AwaitOutput(Process& p, const std::string& word,
                                absl::Duration limit) {
    const absl::Time deadline = absl::Now() + limit;
    while (absl::Now() < deadline) {
      if (absl::StrContains(p.Stdout(), word)) return absl::Now();
      absl::SleepFor(absl::Milliseconds(10));
    }
    return absl::InfiniteFuture();
  }

  std::string root_;
};

TEST_F(MultiHostTest, AnotherHostTakesOverWithinTtlAndAPollAfterADaemonDies) {
  auto a = Host("hostA");
  auto b = Host("hostB");
  auto holder_a = Holder(*a, "hostA");
  ASSERT_NE(AwaitOutput(*holder_a, "GRANTED", absl::Seconds(10)),
            absl::InfiniteFuture());
  auto holder_b = Holder(*b, "hostB");
  // Excluded across hosts for several TTLs while hostA's daemon lives.
  EXPECT_EQ(
      AwaitOutput(*holder_b, "GRANTED", absl::Seconds(2 * kLeaseTtlSeconds)),
      absl::InfiniteFuture());
  const absl::Time killed = absl::Now();
  a->Signal(SIGKILL);
  a->Wait();
  const absl::Time granted =
      AwaitOutput(*holder_b, "GRANTED", absl::Seconds(30));
  ASSERT_NE(granted, absl::InfiniteFuture()) << holder_b->Stdout();
  // Stale after the TTL by the filesystem's clock, noticed at the next poll
  // (plus one 100 ms tick of the lock table).
  EXPECT_LE(granted - killed,
            absl::Seconds(kLeaseTtlSeconds + kPollSeconds + 0.3));
}

TEST_F(MultiHostTest, ClockSkewNeitherBreaksLiveLeasesNorKeepsDeadOnes) {
  const std::vector<std::string> ten_minutes_ahead = {
      "LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
      "FAKETIME=+10m", "FAKETIME_DONT_FAKE_MONOTONIC=1"};
  auto a = Host("hostA");
  auto skewed = Host("hostB", ten_minutes_ahead);
  auto holder_a = Holder(*a, "hostA");
  ASSERT_NE(AwaitOutput(*holder_a, "GRANTED", absl::Seconds(10)),
            absl::InfiniteFuture());
  // hostB believes every file is 10 minutes old by its own clock; it must
  // still respect hostA's live, refreshed lease.
  auto holder_b = Holder(*skewed, "hostB");
  EXPECT_EQ(
      AwaitOutput(*holder_b, "GRANTED", absl::Seconds(3 * kLeaseTtlSeconds)),
      absl::InfiniteFuture());
  // ...and still take it over once hostA is gone.
  a->Signal(SIGKILL);
  a->Wait();
  EXPECT_NE(
      AwaitOutput(*holder_b, "GRANTED", absl::Seconds(kLeaseTtlSeconds + 5)),
      absl::InfiniteFuture());
}

TEST_F(MultiHostTest, SkewedHolderKeepsItsLeaseAgainstAnUnskewedHost) {
  auto skewed =
      Host("hostA", {"LD_PRELOAD=/usr/lib/x86_64-linux-gnu/"
                     "faketime/libfaketime.so.1",
                     "FAKETIME=-10m", "FAKETIME_DONT_FAKE_MONOTONIC=1"});
  auto b = Host("hostB");
  auto holder_a = Holder(*skewed, "hostA");
  ASSERT_NE(AwaitOutput(*holder_a, "GRANTED", absl::Seconds(10)),
            absl::InfiniteFuture());
  auto holder_b = Holder(*b, "hostB");
  EXPECT_EQ(
      AwaitOutput(*holder_b, "GRANTED", absl::Seconds(3 * kLeaseTtlSeconds)),
      absl::InfiniteFuture());
}

// Issue 27: the lease file is neffd's own name, which `neuron_parallel_compile
// --command clear-locks` (it deletes *.lock) leaves alone: while hostA holds
// the key, hostB still waits.
TEST_F(MultiHostTest, ClearLocksBreaksNoLease) {
  namespace fs = std::filesystem;
  auto a = Host("hostA");
  auto holder_a = Holder(*a, "hostA");
  ASSERT_NE(AwaitOutput(*holder_a, "GRANTED", absl::Seconds(30)),
            absl::InfiniteFuture())
      << holder_a->Stdout();
  for (const auto& e : fs::recursive_directory_iterator(root_ + "/shared")) {
    if (e.path().extension() == ".lock") fs::remove(e.path());
  }
  auto b = Host("hostB");
  auto holder_b = Holder(*b, "hostB");
  EXPECT_EQ(
      AwaitOutput(*holder_b, "GRANTED", absl::Seconds(2 * kLeaseTtlSeconds)),
      absl::InfiniteFuture());
}

}  // namespace
}  // namespace neffd::test_support
