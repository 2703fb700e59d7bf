#include "daemon/locks/file_locks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "store/counting_env.h"
#include "store/file_util.h"
#include "store/layout.h"
#include "store/testing/manual_clock_env.h"
#include "tests/harness/planted.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

namespace fs = std::filesystem;

class FileLocksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir();
    a_ = Host("hostA");
    b_ = Host("hostB");
  }

  std::unique_ptr<ExternalLocks> Host(const std::string& host,
                                      Env* clock = Env::Default()) {
    FileLocksOptions o;
    o.env = clock;
    o.locks_dir = absl::StrCat(root_, "/", host, "/locks");
    o.host_id = host;
    o.stale_after = absl::Milliseconds(300);
    o.poll_interval = absl::Milliseconds(100);
    o.entry_dir = [this](const EntryKey& id) { return EntryDir(id); };
    o.quarantine_dir = [this](const EntryKey&) { return QuarantineDir(); };
    o.shared_env = &shared_;
    return NewFileLocks(o);
  }

  std::string EntryDir(const EntryKey& id) const {
    return absl::StrCat(root_, "/store/", RecordsRelDir(id.key()));
  }
  std::string QuarantineDir() const { return root_ + "/store/quarantine"; }
  std::string LeasePath() const {
    return absl::StrCat(EntryDir(id_), "/", kLeaseFileName);
  }
  void ForeignLease(const std::string& content, absl::Duration age) {
    fs::create_directories(EntryDir(id_));
    std::ofstream(LeasePath()) << content;
    struct timespec times[2];
    times[0] = times[1] = absl::ToTimespec(absl::Now() - age);
    ASSERT_EQ(utimensat(AT_FDCWD, LeasePath().c_str(), times, 0), 0);
  }

  std::string root_;
  CountingEnv shared_{Env::Default()};
  std::unique_ptr<ExternalLocks> a_, b_;
  EntryKey id_ = *EntryKey::Parse("neff", "2.0", "cafe");
};

TEST_F(FileLocksTest, OneHostAtATimeThroughTheLeaseFile) {
  std::unique_ptr<ExternalLock> held = a_->TryTake(id_, "lease-a");
  ASSERT_NE(held, nullptr);
  EXPECT_NE(ReadSmallFile(LeasePath(), 4096)->find("hostA"), std::string::npos);
  EXPECT_EQ(b_->TryTake(id_, "lease-b"), nullptr);
  EXPECT_TRUE(held->StillHeld());
  held.reset();
  EXPECT_FALSE(fs::exists(LeasePath()));
  EXPECT_NE(b_->TryTake(id_, "lease-b"), nullptr);
  EXPECT_GT(shared_.metadata_ops(), 0u);
}

TEST_F(FileLocksTest, LeaseUnchangedForTheTtlIsBrokenWhateverItsMtime) {
  // An mtime far in the future (a skewed writer) does not protect a lease
  // that stops changing.
  ForeignLease("hostC 123 old 0\n", -absl::Hours(1));
  EXPECT_EQ(b_->TryTake(id_, "lease-b"), nullptr);  // first sight
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_EQ(b_->TryTake(id_, "lease-b"), nullptr);  // unchanged 100 ms
  absl::SleepFor(absl::Milliseconds(150));
  std::unique_ptr<ExternalLock> held = b_->TryTake(id_, "lease-b");
  ASSERT_NE(held, nullptr);
  EXPECT_NE(ReadSmallFile(LeasePath(), 4096)->find("hostB"), std::string::npos);
}

TEST_F(FileLocksTest, RefreshedLeaseIsNeverBrokenEvenIfItsMtimeIsAncient) {
  std::unique_ptr<ExternalLock> held = a_->TryTake(id_, "lease-a");
  ASSERT_NE(held, nullptr);
  for (int i = 0; i < 10; ++i) {
    struct timespec old[2];  // a writer whose clock is an hour behind
    old[0] = old[1] =
        absl::ToTimespec(absl::Now() - absl::Hours(1) + absl::Seconds(i));
    ASSERT_EQ(utimensat(AT_FDCWD, LeasePath().c_str(), old, 0), 0);
    EXPECT_EQ(b_->TryTake(id_, "lease-b"), nullptr);
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(held->StillHeld());
}

TEST_F(FileLocksTest, LeaseOfThisHostsDeadDaemonIsBrokenAtOnce) {
  pid_t child = fork();
  if (child == 0) _exit(0);
  waitpid(child, nullptr, 0);  // a pid that is certainly gone
  ForeignLease(absl::StrCat("hostB ", child, " old 0\n"), absl::Seconds(1));
  EXPECT_NE(b_->TryTake(id_, "lease-b"), nullptr);
}

TEST_F(FileLocksTest, HolderWhoseLeaseWasBrokenNoLongerHoldsIt) {
  std::unique_ptr<ExternalLock> held = a_->TryTake(id_, "lease-a");
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(b_->TryTake(id_, "lease-b"), nullptr);
  absl::SleepFor(absl::Milliseconds(250));  // hostA stopped refreshing
  std::unique_ptr<ExternalLock> taken = b_->TryTake(id_, "lease-b");
  ASSERT_NE(taken, nullptr);
  EXPECT_FALSE(held->StillHeld());
  held.reset();  // must not remove hostB's lease file
  EXPECT_NE(ReadSmallFile(LeasePath(), 4096)->find("hostB"), std::string::npos);
  EXPECT_TRUE(taken->StillHeld());
}

TEST_F(FileLocksTest, LocalLockFileExcludesOnTheSameHost) {
  FileLocksOptions o;
  o.locks_dir = root_ + "/hostA/locks";
  o.shared = false;
  std::unique_ptr<ExternalLocks> same_host = NewFileLocks(o);
  std::unique_ptr<ExternalLock> held = same_host->TryTake(id_, "x");
  ASSERT_NE(held, nullptr);
  EXPECT_EQ(a_->TryTake(id_, "y"), nullptr);
}

TEST_F(FileLocksTest, PlantedLeaseFileIsBrokenAtOnceAndQuarantined) {
  for (test_support::PlantedShape shape :
       {test_support::PlantedShape::kFifo, test_support::PlantedShape::kSocket,
        test_support::PlantedShape::kSymlinkToRoot,
        test_support::PlantedShape::kDirectory,
        test_support::PlantedShape::kHugeRecord}) {
    SCOPED_TRACE(test_support::PlantedShapeName(shape));
    fs::remove_all(root_ + "/store");
    fs::create_directories(EntryDir(id_));
    test_support::Plant(LeasePath(), shape);
    // Taken at the first try: damage is not waited out for the TTL (and a
    // FIFO is never opened for a blocking read).
    std::unique_ptr<ExternalLock> held = a_->TryTake(id_, "lease1");
    ASSERT_NE(held, nullptr);
    struct stat st;
    ASSERT_EQ(lstat(LeasePath().c_str(), &st), 0);
    EXPECT_TRUE(S_ISREG(st.st_mode));  // ours now
    EXPECT_EQ(std::distance(fs::directory_iterator(QuarantineDir()),
                            fs::directory_iterator()),
              2);  // the planted file and its reason
  }
}

TEST_F(FileLocksTest, ForeignLeaseFileIsBrokenOnceUnchangedForTheTtl) {
  fs::create_directories(EntryDir(id_));
  test_support::Plant(LeasePath(),
                      test_support::PlantedShape::kTruncatedRecord);
  ManualClockEnv clock(absl::UnixEpoch());
  std::unique_ptr<ExternalLocks> a = Host("hostA", &clock);
  // Judged on the host's clock: stale once seen unchanged for the TTL less
  // one poll (300 - 100 ms).
  EXPECT_EQ(a->TryTake(id_, "lease1"), nullptr);  // first seen
  clock.Advance(absl::Milliseconds(199));
  EXPECT_EQ(a->TryTake(id_, "lease1"), nullptr);
  clock.Advance(absl::Milliseconds(1));
  std::unique_ptr<ExternalLock> held = a->TryTake(id_, "lease1");
  ASSERT_NE(held, nullptr);
  EXPECT_FALSE(fs::is_empty(QuarantineDir()));
}

TEST_F(FileLocksTest, TheLeaseFileIsNeffdsOwnNameWhichNoCleanupRemoves) {
  // clear-locks and optimum-neuron's cleanup delete *.lock; TorchNeuron's
  // clear deletes *.neff.
  const std::string name = kLeaseFileName;
  EXPECT_FALSE(absl::EndsWith(name, ".lock")) << name;
  EXPECT_FALSE(absl::EndsWith(name, ".neff")) << name;
  std::unique_ptr<ExternalLock> held = a_->TryTake(id_, "lease-a");
  ASSERT_NE(held, nullptr);
  // What `neuron_parallel_compile --command clear-locks` does to the store.
  for (const auto& e : fs::recursive_directory_iterator(root_ + "/store")) {
    if (e.path().extension() == ".lock") fs::remove(e.path());
  }
  EXPECT_TRUE(fs::exists(LeasePath()));
  EXPECT_TRUE(held->StillHeld());
  EXPECT_EQ(b_->TryTake(id_, "lease-b"), nullptr);
}

}  // namespace
}  // namespace neffd
