#include "daemon/tier/local_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/file_util.h"
#include "store/testing/manual_clock_env.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

namespace fs = std::filesystem;

class LocalTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir();
    fs::create_directories(root_ + "/shared");
  }

  std::unique_ptr<LocalTier> Open(uint64_t capacity) {
    LocalTierOptions options;
    options.dir = root_ + "/tier";
    options.capacity_bytes = capacity;
    options.pin = absl::Seconds(10);
    options.env = &clock_;
    return *LocalTier::Open(options);
  }

  // A shared-store entry with `content`.
  v1::Entry Shared(const std::string& key, const std::string& content) {
    const std::string path = root_ + "/shared/" + key;
    std::ofstream(path, std::ios::binary) << content;
    v1::Entry e;
    e.set_path(path);
    e.set_size(content.size());
    e.set_sha256(Sha256Hex(content));
    return e;
  }

  // Writes `content` to a staged file and opens it, as the store does before
  // it verifies the bytes.
  UniqueFd Stage(const std::string& path, const std::string& content) {
    std::ofstream(path, std::ios::binary) << content;
    return UniqueFd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  }

  // What a refused adoption leaves: the tier fills `shared` from the store.
  // Returns the path it serves.
  std::string ExpectFilledFromTheStore(LocalTier& tier, const EntryKey& id,
                                       const v1::Entry& shared) {
    absl::StatusOr<v1::Entry> got = tier.Get(id, shared);
    EXPECT_TRUE(got.ok()) << got.status();
    if (!got.ok()) return "";
    EXPECT_EQ(Read(got->path()), "artifact bytes");
    EXPECT_EQ(tier.filled_bytes(), 14u);
    return got->path();
  }

  static std::string Read(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string root_;
  ManualClockEnv clock_{absl::FromUnixSeconds(1000)};
};

TEST_F(LocalTierTest, FillsOnceFromTheSharedStoreAndServesLocally) {
  auto tier = Open(1 << 20);
  EntryKey id = *EntryKey::Parse("neff", "1", "k");
  v1::Entry shared = Shared("k", "artifact bytes");
  std::vector<std::thread> readers;
  std::vector<std::string> paths(16);
  for (int i = 0; i < 16; ++i) {
    readers.emplace_back([&, i] { paths[i] = tier->Get(id, shared)->path(); });
  }
  for (auto& t : readers) t.join();
  for (const std::string& p : paths) {
    EXPECT_EQ(p.rfind(root_ + "/tier/", 0), 0u) << p;
    EXPECT_EQ(Read(p), "artifact bytes");
  }
  EXPECT_EQ(tier->filled_bytes(), 14u);     // one fill for 16 readers
  fs::remove(shared.path());                // the shared copy is gone...
  EXPECT_TRUE(tier->Get(id, shared).ok());  // ...the local one serves
}

TEST_F(LocalTierTest, DamagedSharedCopyIsRefusedAndLeavesNothing) {
  auto tier = Open(1 << 20);
  EntryKey id = *EntryKey::Parse("neff", "1", "k");
  v1::Entry shared = Shared("k", "artifact bytes");
  std::ofstream(shared.path(), std::ios::binary) << "artifact bytez";
  absl::StatusOr<v1::Entry> got = tier->Get(id, shared);
  EXPECT_EQ(got.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(tier->used_bytes(), 0u);
  for (const auto& f : fs::recursive_directory_iterator(root_ + "/tier")) {
    EXPECT_FALSE(f.is_regular_file()) << f.path();
  }
}

TEST_F(LocalTierTest, EvictsLeastRecentlyHandedOutButNeverAPinnedFile) {
  auto tier = Open(25);
  std::vector<std::string> paths;
  for (int i = 0; i < 3; ++i) {
    EntryKey id = *EntryKey::Parse("neff", "1", absl::StrCat("k", i));
    paths.push_back(
        tier->Get(id, Shared(absl::StrCat("k", i), "0123456789"))->path());
    clock_.Advance(absl::Seconds(1));
  }
  // 30 bytes over a 25-byte capacity, but all were handed out within the pin.
  EXPECT_EQ(tier->used_bytes(), 30u);
  EXPECT_TRUE(fs::exists(paths[0]));
  clock_.Advance(absl::Seconds(20));
  EntryKey id3 = *EntryKey::Parse("neff", "1", "k3");
  ASSERT_TRUE(tier->Get(id3, Shared("k3", "0123456789")).ok());
  EXPECT_FALSE(fs::exists(paths[0]));
  EXPECT_FALSE(fs::exists(paths[1]));
  EXPECT_TRUE(fs::exists(paths[2]));
  EXPECT_EQ(tier->used_bytes(), 20u);
}

TEST_F(LocalTierTest, SurvivesARestartWithoutRefilling) {
  EntryKey id = *EntryKey::Parse("neff", "1", "k");
  v1::Entry shared = Shared("k", "artifact bytes");
  {
    auto tier = Open(1 << 20);
    ASSERT_TRUE(tier->Get(id, shared).ok());
  }
  auto tier = Open(1 << 20);
  ASSERT_TRUE(tier->Get(id, shared).ok());
  EXPECT_EQ(tier->filled_bytes(), 0u);
}

TEST_F(LocalTierTest, ATierFileTornBeforeARestartIsRefilledNotServed) {
  // An adopted file is not fsynced: after a power loss it may keep its name
  // and size but not its bytes.
  EntryKey id = *EntryKey::Parse("neff", "1", "k");
  v1::Entry shared = Shared("k", "artifact bytes");
  std::string local;
  {
    auto tier = Open(1 << 20);
    const std::string staged = root_ + "/staged";
    UniqueFd fd = Stage(staged, "artifact bytes");
    absl::StatusOr<UniqueFd> copy = tier->Ingest(id, &shared, staged, fd.get());
    ASSERT_TRUE(copy.ok()) << copy.status();
    ForgetVerified(copy->get());
    local = tier->Get(id, shared)->path();
  }
  std::ofstream(local, std::ios::binary) << std::string(14, '\0');
  auto tier = Open(1 << 20);
  absl::StatusOr<v1::Entry> got = tier->Get(id, shared);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(Read(got->path()), "artifact bytes");
  EXPECT_EQ(tier->filled_bytes(), 14u);  // refilled from the shared store
}

TEST_F(LocalTierTest, IngestsAStagedFileAndRemovesEveryCopyOfAKey) {
  auto tier = Open(1 << 20);
  EntryKey id = *EntryKey::Parse("neff", "1", "k");
  v1::Entry shared = Shared("k", "artifact bytes");
  const std::string staged = root_ + "/staged";
  UniqueFd fd = Stage(staged, "artifact bytes");
  absl::StatusOr<UniqueFd> copy = tier->Ingest(id, &shared, staged, fd.get());
  ASSERT_TRUE(copy.ok()) << copy.status();
  ForgetVerified(copy->get());
  EXPECT_FALSE(fs::exists(staged));
  absl::StatusOr<v1::Entry> got = tier->Get(id, shared);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(tier->filled_bytes(), 0u);
  tier->Remove(id);
  EXPECT_FALSE(fs::exists(got->path()));
  EXPECT_EQ(tier->used_bytes(), 0u);
}

TEST_F(LocalTierTest, RefusesAStagedFileSwappedAfterTheStoreOpenedIt) {
  auto tier = Open(1 << 20);
  EntryKey id = *EntryKey::Parse("neff", "1", "k");
  v1::Entry shared = Shared("k", "artifact bytes");
  const std::string staged = root_ + "/staged";
  UniqueFd verified = Stage(staged, "artifact bytes");
  // The client puts other bytes under the staged name after the store
  // verified the first file through its fd.
  fs::remove(staged);
  std::ofstream(staged, std::ios::binary) << "forged! bytes!";
  EXPECT_FALSE(tier->Ingest(id, &shared, staged, verified.get()).ok());
  EXPECT_FALSE(fs::exists(staged));
  EXPECT_EQ(tier->used_bytes(), 0u);
  ExpectFilledFromTheStore(*tier, id, shared);
}

TEST_F(LocalTierTest, RefusesAStagedFileWithAnotherHardLink) {
  auto tier = Open(1 << 20);
  EntryKey id = *EntryKey::Parse("neff", "1", "k");
  v1::Entry shared = Shared("k", "artifact bytes");
  const std::string staged = root_ + "/staged";
  UniqueFd fd = Stage(staged, "artifact bytes");
  // A second name through which the bytes could change after the publish.
  fs::create_hard_link(staged, root_ + "/kept");
  EXPECT_FALSE(tier->Ingest(id, &shared, staged, fd.get()).ok());
  EXPECT_EQ(Read(root_ + "/kept"), "artifact bytes");
  EXPECT_NE(ExpectFilledFromTheStore(*tier, id, shared), root_ + "/kept");
}

// Issue 19: a rank's staged file stays the rank's; the tier must hold a
// copy only the daemon can write. Needs root to give the file another owner.
TEST_F(LocalTierTest, AnotherUsersStagedFileIsCopiedNotAdopted) {
  ASSERT_EQ(geteuid(), 0u) << "needs root (chown); CI runs as root";
  auto tier = Open(1 << 20);
  EntryKey id = *EntryKey::Parse("neff", "1", "k");
  v1::Entry shared = Shared("k", "artifact bytes");
  const std::string staged = root_ + "/staged";
  UniqueFd fd = Stage(staged, "artifact bytes");
  ASSERT_EQ(chown(staged.c_str(), 65534, 65534), 0);  // nobody
  absl::StatusOr<UniqueFd> copy = tier->Ingest(id, &shared, staged, fd.get());
  ASSERT_TRUE(copy.ok()) << copy.status();
  ForgetVerified(copy->get());
  EXPECT_FALSE(fs::exists(staged));
  absl::StatusOr<v1::Entry> got = tier->Get(id, shared);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Read(got->path()), "artifact bytes");
  EXPECT_EQ(tier->filled_bytes(), 0u);  // copied from the staged inode
  struct stat st;
  ASSERT_EQ(stat(got->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, geteuid());
  EXPECT_EQ(st.st_mode & 07777, 0440u);
  ASSERT_EQ(stat((root_ + "/tier").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 02750u);
  // Forged bytes of another user's are refused, and leave nothing.
  UniqueFd forged = Stage(staged, "forged! bytes!");
  ASSERT_EQ(chown(staged.c_str(), 65534, 65534), 0);
  EntryKey other = *EntryKey::Parse("neff", "1", "k2");
  v1::Entry claimed = Shared("k2", "artifact bytes");
  EXPECT_TRUE(absl::IsInvalidArgument(
      tier->Ingest(other, &claimed, staged, forged.get()).status()));
  EXPECT_EQ(tier->used_bytes(), 14u);
}

// Issue 30: a publish's staged file becomes the tier's copy in one pass,
// before the shared store has it, and the store's copy of it is not hashed
// again (store/digest.h RememberVerified).
TEST_F(LocalTierTest, IngestHashesTheDaemonsOwnStagedFileOnceAndAdoptsIt) {
  auto tier = Open(1 << 20);
  EntryKey id = *EntryKey::Parse("neff", "1", "k");
  v1::Entry shared = Shared("k", "artifact bytes");
  const std::string staged = root_ + "/staged";
  UniqueFd fd = Stage(staged, "artifact bytes");
  absl::StatusOr<UniqueFd> copy = tier->Ingest(id, &shared, staged, fd.get());
  ASSERT_TRUE(copy.ok()) << copy.status();
  EXPECT_FALSE(fs::exists(staged));
  absl::StatusOr<v1::Entry> got = tier->Get(id, shared);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(Read(got->path()), "artifact bytes");
  EXPECT_EQ(tier->filled_bytes(), 0u);
  struct stat st;
  ASSERT_EQ(stat(got->path().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0440u);
  // The returned descriptor reads the tier's copy from its start, and a
  // copy of it is the remembered digest.
  const std::string out_path = root_ + "/store-copy";
  UniqueFd out(open(out_path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  absl::StatusOr<CopyResult> copied =
      CopyAndHash(copy->get(), out.get(), "tier copy");
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(copied->sha256, shared.sha256());
  EXPECT_EQ(Read(out_path), "artifact bytes");
  ForgetVerified(copy->get());
}

TEST_F(LocalTierTest, IngestRefusesBytesThatDoNotMatchAndKeepsNothing) {
  auto tier = Open(1 << 20);
  EntryKey id = *EntryKey::Parse("neff", "1", "k");
  v1::Entry shared = Shared("k", "artifact bytes");
  const std::string staged = root_ + "/staged";
  UniqueFd fd = Stage(staged, "forged! bytes!");
  absl::StatusOr<UniqueFd> copy = tier->Ingest(id, &shared, staged, fd.get());
  EXPECT_TRUE(absl::IsInvalidArgument(copy.status())) << copy.status();
  EXPECT_TRUE(fs::exists(staged));  // the caller's to report and remove
  EXPECT_EQ(tier->used_bytes(), 0u);
  ExpectFilledFromTheStore(*tier, id, shared);
}

TEST_F(LocalTierTest, AFileChangedSinceItWasFilledIsHashedAgain) {
  auto tier = Open(1 << 20);
  EntryKey id = *EntryKey::Parse("neff", "1", "k");
  v1::Entry shared = Shared("k", "artifact bytes");
  absl::StatusOr<v1::Entry> first = tier->Get(id, shared);
  ASSERT_TRUE(first.ok());
  // Same size, mtime put back: only the ctime (and the bytes) differ.
  struct stat before;
  ASSERT_EQ(stat(first->path().c_str(), &before), 0);
  chmod(first->path().c_str(), 0640);
  std::ofstream(first->path(), std::ios::binary) << "forged! bytes!";
  const struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, first->path().c_str(), times, 0), 0);
  absl::StatusOr<v1::Entry> again = tier->Get(id, shared);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(Read(again->path()), "artifact bytes");
  EXPECT_EQ(tier->filled_bytes(), 28u);  // refilled, not served as it was
}

}  // namespace
}  // namespace neffd
