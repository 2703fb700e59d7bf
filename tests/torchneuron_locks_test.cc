// Issue 27, item 5: the host's lock directory is shared with unmodified
// TorchNeuron ranks. tests/torchneuron_rank.py replays TorchNeuron's own
// lock algorithm (flock {local}/locks/{key}.lock with backoff) in separate
// processes that link nothing of neffd's, against a real daemon:
//   - a rank waits while a client holds neffd's lease on the key, and gets
//     the lock as soon as the lease ends;
//   - the daemon waits while such a rank holds the flock, and `neffctl
//     locks` lists that rank with its pid;
//   - gc removes the lock files nobody holds and keeps the held ones.
#include <signal.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"
#include "tests/torchneuron_host.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

// 32-hex TorchNeuron keys.
constexpr char kKeyA[] = "0123456789abcdef0123456789abcdef";
constexpr char kKeyB[] = "fedcba9876543210fedcba9876543210";

class TorchNeuronLocksTest : public TorchNeuronHost<::testing::Test> {
 protected:
  // An unmodified TorchNeuron rank on this host asking for `key`, with a
  // cache directory of its own.
  std::unique_ptr<Process> Rank(const std::string& key,
                                const std::string& hold_until = "") {
    return UnmodifiedRank(key, hold_until, "neff",
                          root_ + "/torchneuron_cache");
  }

  // A client of the daemon taking neffd's lease on `key` (held until
  // killed, on a Hold stream).
  std::unique_ptr<Process> LeaseHolder(const std::string& key) {
    return std::make_unique<Process>(std::vector<std::string>{
        Runfile("tests/lock_holder"), "--address=" + daemon_->address(),
        "--key=" + key, "--hold_stream", "--heartbeat_ms=500"});
  }

  std::string LockFile(const std::string& key) const {
    return daemon_->local_dir() + "/locks/" + key + ".lock";
  }
};

TEST_F(TorchNeuronLocksTest, ARankWaitsWhileAClientHoldsTheLease) {
  std::unique_ptr<Process> holder = LeaseHolder(kKeyA);
  ASSERT_TRUE(Said(*holder, "GRANTED")) << holder->Stdout();
  // The daemon holds TorchNeuron's lock file of the key with the lease.
  EXPECT_TRUE(fs::exists(LockFile(kKeyA)));
  std::unique_ptr<Process> rank = Rank(kKeyA);
  ASSERT_TRUE(Said(*rank, "WAITING")) << rank->Stderr();
  EXPECT_FALSE(absl::StrContains(rank->Stdout(), "LOCKED"));
  // The lease ends (its holder dies): the rank gets the lock.
  holder->Signal(SIGKILL);
  holder->Wait();
  ASSERT_TRUE(Said(*rank, "LOCKED")) << rank->Stderr();
  EXPECT_EQ(rank->Wait(), 0) << rank->Stderr();
}

TEST_F(TorchNeuronLocksTest, TheDaemonWaitsForARanksFlockAndNeffctlListsIt) {
  const std::string release = root_ + "/release";
  std::unique_ptr<Process> rank = Rank(kKeyB, release);
  ASSERT_TRUE(Said(*rank, "LOCKED")) << rank->Stderr();

  CommandResult locks = RunNeffctl(*daemon_, {"--json", "locks"});
  ASSERT_EQ(locks.exit_code, 0) << locks.err;
  EXPECT_TRUE(absl::StrContains(locks.out, absl::StrCat("\"key\":\"", kKeyB)))
      << locks.out;
  EXPECT_TRUE(absl::StrContains(locks.out,
                                absl::StrCat("\"pid\":\"", rank->pid(), "\"")))
      << locks.out;
  CommandResult table = RunNeffctl(*daemon_, {"locks"});
  EXPECT_TRUE(absl::StrContains(
      table.out, "1 lock files held by processes without a lease"))
      << table.out;

  // A client of the daemon asking for the key is parked, not granted.
  std::unique_ptr<Process> client = LeaseHolder(kKeyB);
  ASSERT_TRUE(
      WaitUntil([&] { return LockWaiters(*daemon_) == 1; }, absl::Seconds(30)));
  EXPECT_FALSE(absl::StrContains(client->Stdout(), "GRANTED"));
  WriteFile(release, "");
  ASSERT_TRUE(Said(*rank, "RELEASED"));
  EXPECT_TRUE(Said(*client, "GRANTED")) << client->Stdout();
  client->Signal(SIGKILL);
  client->Wait();
  EXPECT_EQ(rank->Wait(), 0) << rank->Stderr();
}

TEST_F(TorchNeuronLocksTest, GcRemovesTheLockFilesNobodyHolds) {
  std::unique_ptr<Process> done = Rank(kKeyA);
  ASSERT_EQ(done->Wait(), 0) << done->Stderr();
  ASSERT_TRUE(fs::exists(LockFile(kKeyA)));  // TorchNeuron never deletes it
  const std::string release = root_ + "/release";
  std::unique_ptr<Process> holding = Rank(kKeyB, release);
  ASSERT_TRUE(Said(*holding, "LOCKED")) << holding->Stderr();

  CommandResult gc = RunNeffctl(*daemon_, {"--json", "gc"});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_TRUE(absl::StrContains(gc.out, "\"lock_files_removed\":\"1\""))
      << gc.out;
  EXPECT_FALSE(fs::exists(LockFile(kKeyA)));
  EXPECT_TRUE(fs::exists(LockFile(kKeyB)));  // held: kept
  WriteFile(release, "");
  EXPECT_EQ(holding->Wait(), 0) << holding->Stderr();
}

}  // namespace
}  // namespace neffd::test_support
