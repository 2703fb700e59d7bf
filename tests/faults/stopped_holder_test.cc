// A holder that is stopped (SIGSTOP) past its lease TTL loses the lease to
// the next waiter; when it is continued, its Publish under the old lease is
// refused, before and after the new holder publishes, and the new holder's
// bytes are what everyone reads. A SIGKILLed holder is replaced at once.
#include <signal.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/faults/wire.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

// The lease id lock_holder printed ("GRANTED <id>"), waiting up to 30 s.
std::string AwaitLease(Process& holder) {
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    std::vector<std::string> words = absl::StrSplit(
        holder.Stdout(), absl::ByAnyChar(" \n"), absl::SkipEmpty());
    if (words.size() >= 2 && words[0] == "GRANTED") return words[1];
    absl::SleepFor(absl::Milliseconds(10));
  }
  ADD_FAILURE() << "no lease: " << holder.Stdout() << holder.Stderr();
  return "";
}

std::unique_ptr<Process> StartHolder(const DaemonProcess& daemon,
                                     const std::string& key) {
  return std::make_unique<Process>(std::vector<std::string>{
      Runfile("tests/lock_holder"), "--address=" + daemon.address(),
      "--key=" + key, "--heartbeat_ms=300"});
}

TEST(StoppedHolderTest, ContinuedHolderCannotPublishOverTheNewHolder) {
  DaemonProcess daemon(NewTempDir("stopped_holder"), {"--lease_ttl=2"});
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  auto stub = daemon.NewStub();
  auto holder = StartHolder(daemon, "stopped");
  const std::string old_lease = AwaitLease(*holder);
  ASSERT_FALSE(old_lease.empty());

  holder->Signal(SIGSTOP);
  const absl::Time stopped = absl::Now();
  v1::LockResponse next = LockKey(*stub, "stopped", getpid());
  ASSERT_EQ(next.outcome(), v1::LockResponse::GRANTED);
  // Not before the TTL (the stopped process is alive), but soon after it.
  EXPECT_GE(absl::Now() - stopped, absl::Seconds(1));
  EXPECT_LE(absl::Now() - stopped, absl::Seconds(10));
  holder->Signal(SIGCONT);

  // The continued holder publishes under its old lease: refused.
  v1::Lease stale = next.lease();
  stale.set_lease_id(old_lease);
  grpc::Status refused = PublishStaged(*stub, stale, "old holder's bytes", "a");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION)
      << refused.error_message();
  EXPECT_TRUE(absl::StartsWith(refused.error_message(), "lease_id"));

  ASSERT_TRUE(
      PublishStaged(*stub, next.lease(), "new holder's bytes", "b").ok());
  refused = PublishStaged(*stub, stale, "old holder's bytes", "c");
  EXPECT_EQ(refused.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_EQ(LookupContent(*stub, "stopped"), "new holder's bytes");
  // Its keepalives are refused too; nothing crashed.
  EXPECT_TRUE(holder->Running());
  EXPECT_TRUE(daemon.process().Running());
}

TEST(StoppedHolderTest, KilledHolderIsReplacedAndItsLeaseIsDead) {
  DaemonProcess daemon(NewTempDir("killed_holder"), {"--lease_ttl=60"});
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  auto stub = daemon.NewStub();
  auto holder = StartHolder(daemon, "killed");
  const std::string old_lease = AwaitLease(*holder);
  holder->Signal(SIGKILL);
  holder->Wait();
  const absl::Time killed = absl::Now();
  v1::LockResponse next = LockKey(*stub, "killed", getpid());
  ASSERT_EQ(next.outcome(), v1::LockResponse::GRANTED);
  EXPECT_LE(absl::Now() - killed, absl::Seconds(5));  // not the 60 s TTL
  v1::Lease stale = next.lease();
  stale.set_lease_id(old_lease);
  EXPECT_EQ(PublishStaged(*stub, stale, "ghost", "g").error_code(),
            grpc::StatusCode::FAILED_PRECONDITION);
  ASSERT_TRUE(PublishStaged(*stub, next.lease(), "live", "l").ok());
  EXPECT_EQ(LookupContent(*stub, "killed"), "live");
}

}  // namespace
}  // namespace neffd::test_support
