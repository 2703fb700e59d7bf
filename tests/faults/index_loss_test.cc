// Index loss or corruption: the RocksDB directory is deleted, or every file
// in it is overwritten with garbage, while the daemon is down. The daemon
// starts, says so in one line when it had to move a damaged index aside,
// and serves every entry it served before (the index is a cache of the
// store, docs/ARCHITECTURE.md, "On-disk layout").
#include <signal.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/faults/wire.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

constexpr int kEntries = 50;

class IndexLossTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    root_ = NewTempDir("index_" + GetParam());
    daemon_ = std::make_unique<DaemonProcess>(root_);
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
    auto stub = daemon_->NewStub();
    for (int i = 0; i < kEntries; ++i) {
      v1::LockResponse r = LockKey(*stub, Key(i), getpid());
      ASSERT_EQ(r.outcome(), v1::LockResponse::GRANTED);
      ASSERT_TRUE(PublishStaged(*stub, r.lease(), Content(i)).ok());
    }
  }

  static std::string Key(int i) { return absl::StrCat("idx", i); }
  static std::string Content(int i) { return absl::StrCat("artifact ", i); }

  std::string root_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_P(IndexLossTest, DaemonStartsSaysSoAndServesTheSameHits) {
  const std::string index = daemon_->local_dir() + "/index";
  ASSERT_TRUE(fs::is_directory(index));
  daemon_->Signal(GetParam() == "killed_then_corrupt" ? SIGKILL : SIGTERM);
  daemon_->Wait();
  if (GetParam() == "deleted") {
    fs::remove_all(index);
  } else {
    int damaged = 0;
    for (const auto& e : fs::directory_iterator(index)) {
      if (!e.is_regular_file()) continue;
      WriteFile(e.path().string(), "\x01garbage, not a rocksdb file\xff");
      ++damaged;
    }
    ASSERT_GT(damaged, 0);
  }

  ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
  // The note is written just before the "listening" line, which may come a
  // moment after the socket accepts.
  for (int i = 0; i < 500; ++i) {
    if (absl::StrContains(daemon_->process().Stdout(), "listening")) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  const std::string err = daemon_->process().Stderr();
  if (GetParam() != "deleted") {
    std::vector<std::string> notes;
    for (absl::string_view line : absl::StrSplit(err, '\n')) {
      if (absl::StrContains(line, "index")) notes.emplace_back(line);
    }
    ASSERT_EQ(notes.size(), 1u) << err;
    EXPECT_TRUE(absl::StrContains(notes[0], "moved it to")) << notes[0];
  }
  auto stub = daemon_->NewStub();
  int hits = 0;
  for (int i = 0; i < kEntries; ++i) {
    hits += LookupContent(*stub, Key(i)) == Content(i);
  }
  EXPECT_EQ(hits, kEntries);
  RecordProperty("entries_served_after_recovery", hits);
}

INSTANTIATE_TEST_SUITE_P(Damage, IndexLossTest,
                         ::testing::Values("deleted", "corrupt",
                                           "killed_then_corrupt"));

}  // namespace
}  // namespace neffd::test_support
