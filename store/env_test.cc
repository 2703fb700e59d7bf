// The Env's contract (errors name the call and the file, with the errno's
// code), the helpers built on it, the wrappers tests use, and the metadata
// costs the store documents, as counted by CountingEnv.
#include "store/env.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/counting_env.h"
#include "store/digest.h"
#include "store/file_util.h"
#include "store/lock_paths.h"
#include "store/store.h"
#include "store/testing/fault_injection_env.h"
#include "store/testing/manual_clock_env.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

namespace fs = std::filesystem;

class EnvTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = test_support::TestTempDir(); }

  std::string dir_;
  Env* const env_ = Env::Default();
};

TEST_F(EnvTest, ErrorsNameTheCallTheFileAndKeepTheErrnosCode) {
  const std::string missing = dir_ + "/missing";
  absl::StatusOr<UniqueFd> fd = env_->Open(missing, O_RDONLY);
  EXPECT_TRUE(absl::IsNotFound(fd.status())) << fd.status();
  EXPECT_EQ(fd.status().message(),
            absl::StrCat("open ", missing, ": No such file or directory"));
  absl::Status renamed = env_->Rename(missing, dir_ + "/to");
  EXPECT_TRUE(absl::IsNotFound(renamed));
  EXPECT_TRUE(absl::StrContains(renamed.message(),
                                absl::StrCat("rename ", missing, " to ")));
  EXPECT_TRUE(absl::IsAlreadyExists(env_->Mkdir(dir_, 0755)));
  EXPECT_TRUE(
      absl::IsResourceExhausted(FsCallError({FsOp::kWrite, "/x"}, ENOSPC)));
  EXPECT_TRUE(
      absl::IsResourceExhausted(FsCallError({FsOp::kWrite, "/x"}, EDQUOT)));
}

TEST_F(EnvTest, TryLockIsExclusiveAcrossOpenFiles) {
  const std::string path = dir_ + "/lock";
  absl::StatusOr<UniqueFd> a = env_->Open(path, O_RDWR | O_CREAT, 0644);
  absl::StatusOr<UniqueFd> b = env_->Open(path, O_RDWR);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(env_->TryLock(a->get(), path).ok());
  EXPECT_TRUE(absl::IsUnavailable(env_->TryLock(b->get(), path)));
  *a = UniqueFd();  // closing releases it
  EXPECT_TRUE(env_->TryLock(b->get(), path).ok());
}

TEST_F(EnvTest, MakeDirsCreatesTheChainAndRefusesAFileInTheWay) {
  CountingEnv counted(env_);
  const std::string deep = dir_ + "/a/b/c";
  ASSERT_TRUE(MakeDirs(deep, 0755, &counted).ok());
  EXPECT_TRUE(fs::is_directory(deep));
  // An existing directory costs one mkdir and one stat, however deep.
  const uint64_t before = counted.metadata_ops();
  ASSERT_TRUE(MakeDirs(deep, 0755, &counted).ok());
  EXPECT_EQ(counted.metadata_ops() - before, 2u);

  std::ofstream(dir_ + "/file") << "x";
  absl::Status blocked = MakeDirs(dir_ + "/file", 0755, &counted);
  EXPECT_TRUE(absl::IsFailedPrecondition(blocked)) << blocked;
  EXPECT_TRUE(absl::StrContains(blocked.message(), dir_ + "/file"));
}

// Issue 19: directories the daemon and the ranks share keep group write and
// setgid whatever the umask of whoever made them, and lock files are 0660.
TEST_F(EnvTest, GroupDirsAndLockFilesGetTheirModesWhateverTheUmask) {
  const mode_t old_umask = umask(027);
  const std::string deep = dir_ + "/shared/x/y";
  absl::Status made = MakeGroupDirs(deep, kSharedDirMode, env_);
  const EntryKey id = *EntryKey::Parse("neff", "2.19", "k");
  absl::StatusOr<UniqueFd> lock = OpenLockFile(dir_ + "/locks", id, env_);
  const EntryKey hlo = *EntryKey::Parse("hlo", "2.19", "k");
  absl::StatusOr<UniqueFd> hlo_lock = OpenLockFile(dir_ + "/locks", hlo, env_);
  umask(old_umask);
  ASSERT_TRUE(made.ok()) << made;
  ASSERT_TRUE(lock.ok()) << lock.status();
  ASSERT_TRUE(hlo_lock.ok()) << hlo_lock.status();
  auto mode = [](const std::string& path) {
    struct stat st;
    return stat(path.c_str(), &st) == 0 ? st.st_mode & 07777 : 0;
  };
  EXPECT_EQ(mode(dir_ + "/shared"), 02775u);
  EXPECT_EQ(mode(deep), 02775u);
  EXPECT_EQ(mode(dir_ + "/locks"), 02770u);
  // A NEFF's lock is TorchNeuron's file; an HLO entry's is beside them.
  EXPECT_EQ(LockFilePath(dir_ + "/locks", id), dir_ + "/locks/k.lock");
  EXPECT_EQ(mode(LockFilePath(dir_ + "/locks", id)), 0660u);
  EXPECT_EQ(LockFilePath(dir_ + "/locks", hlo), dir_ + "/locks/hlo/k.lock");
  EXPECT_EQ(mode(dir_ + "/locks/hlo"), 02770u);
  EXPECT_EQ(mode(LockFilePath(dir_ + "/locks", hlo)), 0660u);
}

TEST_F(EnvTest, AnUnusableLockDirectoryIsAnErrorNamingIt) {
  std::ofstream(dir_ + "/locks") << "not a directory";
  const EntryKey id = *EntryKey::Parse("neff", "2.19", "k");
  absl::StatusOr<UniqueFd> lock = OpenLockFile(dir_ + "/locks", id, env_);
  ASSERT_FALSE(lock.ok());
  EXPECT_TRUE(absl::StrContains(lock.status().message(),
                                "lock directory " + dir_ + "/locks"))
      << lock.status();
}

TEST_F(EnvTest, RemoveTreeRemovesEverythingButFollowsNoSymlink) {
  fs::create_directories(dir_ + "/outside");
  std::ofstream(dir_ + "/outside/keep") << "keep";
  fs::create_directories(dir_ + "/tree/sub");
  std::ofstream(dir_ + "/tree/sub/f") << "f";
  fs::create_directory_symlink(dir_ + "/outside", dir_ + "/tree/link");
  EXPECT_TRUE(RemoveTree(dir_ + "/tree").ok());
  EXPECT_FALSE(fs::exists(dir_ + "/tree"));
  EXPECT_TRUE(fs::exists(dir_ + "/outside/keep"));
}

TEST_F(EnvTest, AFailedAtomicWriteLeavesNeitherTempFileNorTarget) {
  FaultInjectionEnv faults;
  faults.Fail(FsOp::kRename, EIO, "/marker");
  absl::Status s = WriteFileAtomically(dir_, "marker", "data", "h",
                                       /*durable=*/true, &faults);
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(fs::is_empty(dir_)) << fs::directory_iterator(dir_)->path();
}

TEST_F(EnvTest, FaultsHitTheNthMatchingCallOnly) {
  FaultInjectionEnv faults;
  faults.Fail(FsOp::kMkdir, EACCES, "/want", /*nth=*/2);
  EXPECT_TRUE(faults.Mkdir(dir_ + "/other", 0755).ok());  // path differs
  EXPECT_TRUE(faults.Mkdir(dir_ + "/want1", 0755).ok());
  absl::Status second = faults.Mkdir(dir_ + "/want2", 0755);
  EXPECT_TRUE(absl::IsPermissionDenied(second)) << second;
  EXPECT_FALSE(fs::exists(dir_ + "/want2"));  // never reached the disk
  EXPECT_TRUE(faults.Mkdir(dir_ + "/want3", 0755).ok());
  EXPECT_EQ(faults.injected_failures(), 1);

  faults.FailEvery(std::nullopt, EIO, "/sick");
  struct stat st;
  EXPECT_FALSE(faults.Stat(dir_ + "/sick", &st).ok());
  EXPECT_FALSE(faults.Mkdir(dir_ + "/sick", 0755).ok());
  faults.Clear();
  EXPECT_TRUE(faults.Mkdir(dir_ + "/sick", 0755).ok());
}

TEST_F(EnvTest, DelayedCallsTakeAtLeastTheDelay) {
  FaultInjectionEnv faults;
  faults.Delay(FsOp::kStat, absl::Milliseconds(50));
  struct stat st;
  const absl::Duration start = env_->MonotonicNow();
  EXPECT_TRUE(faults.Stat(dir_, &st).ok());
  EXPECT_GE(env_->MonotonicNow() - start, absl::Milliseconds(50));
}

TEST_F(EnvTest, ManualClockMovesOnlyWhenTold) {
  ManualClockEnv clock(absl::FromUnixSeconds(100));
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(100));
  clock.SleepFor(absl::Seconds(5));  // returns at once, 5 s later
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(105));
  EXPECT_EQ(clock.MonotonicNow(), absl::Seconds(5));
  clock.Set(absl::FromUnixSeconds(50));  // the wall clock steps back...
  EXPECT_EQ(clock.Now(), absl::FromUnixSeconds(50));
  EXPECT_EQ(clock.MonotonicNow(), absl::Seconds(5));  // ...monotonic doesn't
}

TEST_F(EnvTest, StartThreadRunsTheBodyUnderItsNameAndIsCounted) {
  CountingEnv counting(env_);
  std::string comm;
  EnvThread thread = counting.StartThread("neffd-a-long-thread-name", [&] {
    std::ifstream in("/proc/thread-self/comm");
    std::getline(in, comm);
  });
  thread.Join();
  EXPECT_EQ(comm, "neffd-a-long-th");  // the kernel's 15 bytes
  EXPECT_EQ(counting.threads_started(), 1u);
  // A thread still running when its handle goes is joined, not terminated.
  bool ran = false;
  {
    EnvThread scoped = env_->StartThread("scoped", [&] { ran = true; });
  }
  EXPECT_TRUE(ran);
}

TEST_F(EnvTest, StoreHitPathCostsTwoStatsAndAMissOneOpen) {
  StoreOptions options;
  options.root = dir_ + "/store";
  options.host_id = "h";
  std::unique_ptr<Store> store = *Store::Open(options);
  const EntryKey id = *EntryKey::Parse("neff", "1", "k");
  EXPECT_EQ(store->metadata_ops(), 0u);
  EXPECT_TRUE(absl::IsNotFound(store->Find(id).status()));
  // A miss: one open of the artifact (a key never compiled, or cleared).
  EXPECT_EQ(store->metadata_ops(), 1u);
  absl::StatusOr<PublishResult> put =
      store->PublishBytes(id, "bytes", Sha256Hex("bytes"), {"h", 1}, {});
  ASSERT_TRUE(put.ok()) << put.status();
  const uint64_t before = store->metadata_ops();
  EXPECT_TRUE(store->StillValid(id, put->stored.identity));
  EXPECT_EQ(store->metadata_ops() - before, 2u);
}

}  // namespace
}  // namespace neffd
