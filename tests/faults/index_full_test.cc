// The index's disk is full (issue 18, part 3): the RocksDB index on its own
// 8 MiB tmpfs (--index_dir; the test mounts it, CI runs as root) that the
// test fills while the daemon serves. The store is the truth: a publish
// still answers PUBLISHED, the entry and one another host published are
// hits with their bytes, old hits stay hits, the failed index writes are
// counted in stats, and once space returns (and the daemon restarts) the
// index catches up.
#include <signal.h>
#include <sys/mount.h>

#include <cstdio>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/store.h"
#include "tests/faults/wire.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

uint64_t IndexWriteFailures(v1::CompileCache::Stub& stub) {
  v1::Stats stats;
  grpc::ClientContext context;
  EXPECT_TRUE(stub.GetStats(&context, v1::GetStatsRequest(), &stats).ok());
  return stats.index_write_failures();
}

// Writes `path` until the filesystem refuses (ENOSPC).
void FillUp(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "w");
  ASSERT_NE(f, nullptr);
  const std::string chunk(64 << 10, 'f');
  while (std::fwrite(chunk.data(), 1, chunk.size(), f) == chunk.size()) {
  }
  std::fclose(f);
}

TEST(IndexFullTest, AFullIndexDiskNeverTurnsAHitIntoAnError) {
  if (!CanMount()) GTEST_SKIP() << "needs root to mount a tmpfs";
  const std::string root = NewTempDir("index_full");
  const std::string index = root + "/index";
  fs::create_directories(index);
  ASSERT_EQ(mount("tmpfs", index.c_str(), "tmpfs", 0, "size=8m,mode=0755"), 0)
      << strerror(errno);
  struct Unmount {
    std::string dir;
    ~Unmount() { umount2(dir.c_str(), MNT_DETACH); }
  } unmount{index};
  // Rocks writes go to files inside the mount, never to the mount point.
  DaemonProcess daemon(root, {"--index_dir=" + index + "/db"});
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  auto stub = daemon.NewStub();
  const std::string before = "published while the index had room";
  ASSERT_TRUE(PublishStaged(*stub, GrantLease(*stub, "before"), before).ok());

  FillUp(index + "/filler");
  // The WAL's last page has room for a few records: enough publishes that
  // the index must grow.
  for (int i = 0; i < 32; ++i) {
    const std::string key = absl::StrCat("during", i);
    const std::string during = "published while the index disk is full " + key;
    grpc::Status published =
        PublishStaged(*stub, GrantLease(*stub, key), during);
    ASSERT_TRUE(published.ok()) << key << ": " << published.error_message()
                                << daemon.process().Stderr();
    EXPECT_EQ(LookupContent(*stub, key), during);
  }
  // Another host's entry: found on the store, verified, served.
  StoreOptions options;
  options.root = daemon.neff_dir();
  options.host_id = "otherhost";
  std::unique_ptr<Store> store = *Store::Open(options);
  const std::string elsewhere = "published by another host";
  ASSERT_TRUE(store
                  ->PublishBytes(*EntryKey::Parse("neff", "1.0", "elsewhere"),
                                 elsewhere, Sha256Hex(elsewhere),
                                 {"otherhost", 1}, {})
                  .ok());
  EXPECT_EQ(LookupContent(*stub, "elsewhere"), elsewhere);
  EXPECT_EQ(LookupContent(*stub, "before"), before);
  const uint64_t failures = IndexWriteFailures(*stub);
  EXPECT_GT(failures, 0u) << "the index writes did not fail: no test";

  // Space returns and the daemon restarts: every entry is a hit, the index
  // takes writes again and holds every entry.
  ASSERT_EQ(unlink((index + "/filler").c_str()), 0);
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0) << daemon.process().Stderr();
  DaemonProcess restarted(daemon);
  ASSERT_TRUE(restarted.Start()) << restarted.process().Stderr();
  stub = restarted.NewStub();
  for (int i = 0; i < 32; ++i) {
    const std::string key = absl::StrCat("during", i);
    EXPECT_EQ(LookupContent(*stub, key),
              "published while the index disk is full " + key);
  }
  const std::string after = "published once space returned";
  ASSERT_TRUE(PublishStaged(*stub, GrantLease(*stub, "after"), after).ok());
  EXPECT_EQ(LookupContent(*stub, "after"), after);
  EXPECT_EQ(IndexWriteFailures(*stub), 0u);
  v1::Stats stats;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->GetStats(&context, v1::GetStatsRequest(), &stats).ok());
  EXPECT_GE(stats.entries(), 34u) << "the index did not catch up";
  RecordProperty("index_write_failures", static_cast<int>(failures));
}

}  // namespace
}  // namespace neffd::test_support
