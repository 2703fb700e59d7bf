#include "daemon/runtime/local_dir.h"

#include <sys/stat.h>

#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

mode_t ModeOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

TEST(CheckLocalFilesystemTest, AcceptsLocalDiskAndNamesMissingPaths) {
  EXPECT_TRUE(CheckLocalDirFilesystem("/tmp").ok());
  absl::Status missing = CheckLocalDirFilesystem("/nonexistent/dir");
  EXPECT_TRUE(absl::IsNotFound(missing));
  EXPECT_TRUE(absl::StrContains(missing.message(), "/nonexistent/dir"));
}

TEST(PrepareLocalDirTest, CreatesEachPartWithItsMode) {
  const LocalDir dir{test_support::TestTempDir() + "/local"};
  ASSERT_TRUE(PrepareLocalDir(dir, "").ok());
  EXPECT_EQ(ModeOf(dir.root), 02770u);
  EXPECT_EQ(ModeOf(dir.locks()), 02770u);
  EXPECT_EQ(ModeOf(dir.staging()), 03770u);
  EXPECT_EQ(ModeOf(dir.tier()), 02750u);
  // The index is RocksDB's to create.
  EXPECT_EQ(ModeOf(dir.index()), 0u);
}

TEST(PrepareLocalDirTest, ClosesAStagingDirAnOlderDaemonLeftOpen) {
  const LocalDir dir{test_support::TestTempDir() + "/local"};
  ASSERT_EQ(mkdir(dir.root.c_str(), 0755), 0);
  ASSERT_EQ(mkdir(dir.staging().c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir.staging().c_str(), 01777), 0);
  ASSERT_TRUE(PrepareLocalDir(dir, "").ok());
  EXPECT_EQ(ModeOf(dir.staging()), 03770u);
}

TEST(PrepareLocalDirTest, NamesAPathItCannotCreate) {
  const std::string file = test_support::TestTempDir() + "/a_file";
  ASSERT_EQ(mknod(file.c_str(), S_IFREG | 0644, 0), 0);
  absl::Status s = PrepareLocalDir(LocalDir{file + "/local"}, "");
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(absl::StrContains(s.message(), file)) << s;
}

}  // namespace
}  // namespace neffd
