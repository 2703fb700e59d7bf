// Disk full: the neff store on a 4 MiB tmpfs (the test mounts it; CI runs as
// root). A publish that does not fit fails with RESOURCE_EXHAUSTED and a
// message, its staged file is removed, no partial entry or temp file is
// left, the daemon keeps serving hits, and publishing works again once
// space returns.
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/lock_paths.h"
#include "tests/faults/wire.h"
#include "tests/harness/process.h"
#include "tests/harness/store_files.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

uint64_t FreeBytes(const std::string& dir) {
  struct statvfs st;
  return statvfs(dir.c_str(), &st) == 0
             ? static_cast<uint64_t>(st.f_bavail) * st.f_frsize
             : 0;
}

// Regular files under `dir` that are neither an artifact ({key}.neff) nor
// model.done nor a lock: temp files a failed publish could leave behind.
std::vector<std::string> StrayFiles(const std::string& dir) {
  std::vector<std::string> stray;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_regular_file()) continue;
    const std::string name = e.path().filename().string();
    const bool artifact = name[0] != '.' && absl::EndsWith(name, ".neff");
    if (!artifact && name != "model.done" && name != kLeaseFileName &&
        name.find(".lock") == std::string::npos) {
      stray.push_back(e.path().string());
    }
  }
  return stray;
}

class DiskFullTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!CanMount()) GTEST_SKIP() << "needs root to mount a tmpfs";
    root_ = NewTempDir("disk_full");
    store_ = root_ + "/neff";
    fs::create_directories(store_);
    ASSERT_EQ(mount("tmpfs", store_.c_str(), "tmpfs", 0, "size=4m,mode=0755"),
              0)
        << strerror(errno);
    mounted_ = true;
    daemon_ = std::make_unique<DaemonProcess>(root_);
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
    stub_ = daemon_->NewStub();
  }
  void TearDown() override {
    daemon_.reset();
    if (mounted_) umount2(store_.c_str(), MNT_DETACH);
  }

  v1::Lease Grant(const std::string& key) { return GrantLease(*stub_, key); }

  std::string root_, store_;
  bool mounted_ = false;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::CompileCache::Stub> stub_;
};

TEST_F(DiskFullTest, PublishFailsCleanlyAndRecoversWhenSpaceReturns) {
  const std::string small(512 << 10, 's');
  ASSERT_TRUE(PublishStaged(*stub_, Grant("small"), small).ok());

  // Bigger than the whole filesystem.
  const uint64_t free_before = FreeBytes(store_);
  v1::Lease big_lease = Grant("big");
  const std::string big(6 << 20, 'b');
  grpc::Status full = PublishStaged(*stub_, big_lease, big, "big.neff");
  EXPECT_EQ(full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << full.error_message();
  EXPECT_FALSE(full.error_message().empty());
  EXPECT_FALSE(fs::exists(big_lease.staging_dir() + "/big.neff"));
  EXPECT_FALSE(fs::exists(FilesOf(store_, "big").artifact));
  EXPECT_FALSE(fs::exists(FilesOf(store_, "big").done));
  EXPECT_EQ(StrayFiles(store_), std::vector<std::string>{});
  // Nothing of the 6 MiB leaked (the lease file and entry dir stay).
  EXPECT_GE(FreeBytes(store_) + (64 << 10), free_before);

  // Hits are still served while the disk is full.
  const std::string filler = store_ + "/filler";
  {
    // Fill what is left; the write stops at ENOSPC.
    FILE* f = fopen(filler.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::string chunk(64 << 10, 'f');
    while (fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size()) {
    }
    fclose(f);
  }
  EXPECT_EQ(LookupContent(*stub_, "small"), small);
  v1::Lease medium_lease = Grant("medium");
  const std::string medium(256 << 10, 'm');
  grpc::Status still_full = PublishStaged(*stub_, medium_lease, medium);
  EXPECT_EQ(still_full.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED)
      << still_full.error_message();
  v1::LookupResponse::Result result;
  EXPECT_EQ(LookupContent(*stub_, "medium", &result), "");
  EXPECT_EQ(result, v1::LookupResponse::MISS);

  // Space returns: the holder kept its lease and publishes again.
  ASSERT_EQ(unlink(filler.c_str()), 0);
  EXPECT_TRUE(PublishStaged(*stub_, medium_lease, medium).ok());
  EXPECT_EQ(LookupContent(*stub_, "medium"), medium);
  EXPECT_EQ(LookupContent(*stub_, "small"), small);
  EXPECT_EQ(StrayFiles(store_), std::vector<std::string>{});
  EXPECT_TRUE(daemon_->process().Running());
  RecordProperty("faults_injected", 2);
}

}  // namespace
}  // namespace neffd::test_support
