// StagedOutput on a real filesystem: when a rank's output is moved into the
// staging directory or copied there, and how it comes back when the publish
// does not take it.
#include "client/staged_output.h"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"
#include "store/file_util.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

class StagedOutputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string root = test_support::NewTempDir("staged_output");
    output_ = root + "/model.neff";
    staged_ = root + "/staging/key.1.0-abc.staged";
    ASSERT_EQ(mkdir((root + "/staging").c_str(), 0730), 0);
    std::ofstream(output_, std::ios::binary) << bytes_;
    ASSERT_EQ(chmod(output_.c_str(), 0644), 0);
    ASSERT_EQ(lstat(output_.c_str(), &compiled_), 0);
  }

  // The inode at `path`, or 0 if there is none.
  static ino_t InodeAt(const std::string& path) {
    struct stat st;
    return lstat(path.c_str(), &st) == 0 ? st.st_ino : 0;
  }
  std::string Read(const std::string& path) {
    return ReadSmallFile(path, 1 << 20).value_or("<unreadable>");
  }

  const std::string bytes_ = std::string(300000, 'n') + "eff";
  std::string output_, staged_;
  struct stat compiled_;
};

TEST_F(StagedOutputTest, AnOutputThePublishMayTakeIsMovedNotCopied) {
  absl::StatusOr<StagedOutput> staged =
      StagedOutput::Stage(output_, bytes_.size(), staged_, /*may_move=*/true);
  ASSERT_TRUE(staged.ok()) << staged.status();
  EXPECT_TRUE(staged->moved());
  EXPECT_EQ(InodeAt(staged_), compiled_.st_ino);
  EXPECT_EQ(InodeAt(output_), 0u);
  staged->Finish(/*published=*/true);
  EXPECT_EQ(InodeAt(staged_), 0u);
  EXPECT_EQ(InodeAt(output_), 0u);  // the cache has it now
}

TEST_F(StagedOutputTest, AMovedOutputNotPublishedIsBackAtItsPath) {
  absl::StatusOr<StagedOutput> staged =
      StagedOutput::Stage(output_, bytes_.size(), staged_, true);
  ASSERT_TRUE(staged.ok()) << staged.status();
  staged->Finish(/*published=*/false);
  EXPECT_EQ(InodeAt(output_), compiled_.st_ino);
  EXPECT_EQ(Read(output_), bytes_);
  EXPECT_EQ(InodeAt(staged_), 0u);
}

TEST_F(StagedOutputTest, AMovedOutputTheDaemonRemovedIsCopiedBack) {
  absl::StatusOr<StagedOutput> staged =
      StagedOutput::Stage(output_, bytes_.size(), staged_, true);
  ASSERT_TRUE(staged.ok()) << staged.status();
  ASSERT_EQ(unlink(staged_.c_str()), 0);  // as a refusing daemon does
  staged->Finish(/*published=*/false);
  EXPECT_EQ(Read(output_), bytes_);
  struct stat back;
  ASSERT_EQ(lstat(output_.c_str(), &back), 0);
  EXPECT_EQ(back.st_mode & 07777, 0644u);
  EXPECT_EQ(InodeAt(staged_), 0u);
}

TEST_F(StagedOutputTest, AKeptOrHardLinkedOutputIsCopied) {
  for (const bool may_move : {false, true}) {
    SCOPED_TRACE(may_move ? "hard-linked" : "kept");
    const std::string other_name = output_ + ".link";
    if (may_move) {
      ASSERT_EQ(link(output_.c_str(), other_name.c_str()), 0);
    }
    absl::StatusOr<StagedOutput> staged =
        StagedOutput::Stage(output_, bytes_.size(), staged_, may_move);
    ASSERT_TRUE(staged.ok()) << staged.status();
    EXPECT_FALSE(staged->moved());
    EXPECT_EQ(InodeAt(output_), compiled_.st_ino);
    EXPECT_NE(InodeAt(staged_), compiled_.st_ino);
    EXPECT_EQ(Read(staged_), bytes_);
    staged->Finish(/*published=*/true);
    EXPECT_EQ(InodeAt(staged_), 0u);
    EXPECT_EQ(Read(output_), bytes_);
  }
}

TEST_F(StagedOutputTest, AnOutputOfAnotherSizeStagesNothing) {
  absl::StatusOr<StagedOutput> staged =
      StagedOutput::Stage(output_, bytes_.size() + 1, staged_, true);
  EXPECT_EQ(staged.status().code(), absl::StatusCode::kDataLoss)
      << staged.status();
  EXPECT_EQ(InodeAt(staged_), 0u);
  EXPECT_EQ(Read(output_), bytes_);
}

}  // namespace
}  // namespace neffd
