// The store does not grow in the dark (issue 18, part 3): on a real daemon
// and a real filesystem, `neffctl gc` (no goal: no entry is removed)
// removes temp files of crashed publishes older than --gc_temp_grace, keeps
// quarantine/ within --gc_quarantine_age and --gc_quarantine_bytes (oldest
// first) and .trash/ within --gc_trash_age, counts what it removed and what
// is left, and `neffctl stats` shows what is left. Published entries stay
// hits.
#include <fcntl.h>
#include <sys/stat.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "tests/faults/wire.h"
#include "tests/harness/process.h"
#include "tests/harness/store_files.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

constexpr uint64_t kMiB = 1 << 20;

// Gives `path` and everything under it the mtime `age` ago.
void Age(const std::string& path, absl::Duration age) {
  struct timespec t[2];
  t[0] = t[1] = absl::ToTimespec(absl::Now() - age);
  if (fs::is_directory(path)) {
    for (const auto& e : fs::recursive_directory_iterator(path)) {
      utimensat(AT_FDCWD, e.path().c_str(), t, AT_SYMLINK_NOFOLLOW);
    }
  }
  utimensat(AT_FDCWD, path.c_str(), t, AT_SYMLINK_NOFOLLOW);
}

// A file of `size` bytes at `path`, `age` old.
void Plant(const std::string& path, uint64_t size, absl::Duration age) {
  fs::create_directories(fs::path(path).parent_path());
  WriteFile(path, std::string(size, 'x'));
  Age(path, age);
}

template <typename Message>
Message FromJson(const std::string& json) {
  Message message;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &message).ok())
      << json;
  return message;
}

TEST(GcLeftoversTest, OldTempFilesGoAndAsideDirsStayWithinTheirBounds) {
  const std::string root = NewTempDir("gc_leftovers");
  DaemonProcess daemon(root, {"--gc_temp_grace=10m", "--gc_quarantine_age=24h",
                              absl::StrCat("--gc_quarantine_bytes=", 3 * kMiB),
                              "--gc_trash_age=1h"});
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  auto stub = daemon.NewStub();
  const std::string content = "a published entry";
  ASSERT_TRUE(PublishStaged(*stub, GrantLease(*stub, "kept"), content).ok());

  const std::string store = daemon.neff_dir();
  const std::string kept = FilesOf(store, "kept").shard;
  const std::string crashed = FilesOf(store, "crashed").records;
  // Temp files of crashed publishes: two past the grace, one young (a
  // publish that may be in flight).
  Plant(kept + "/.kept.neff.tmp.hostx.99.00aa", 100000, absl::Hours(2));
  Plant(crashed + "/.model.done.tmp.hostx.99.00bb", 300, absl::Hours(3));
  Plant(kept + "/.kept.neff.tmp.hostx.98.00cc", 5000, absl::Minutes(1));
  // quarantine/: one past the age bound, then three of 1 MiB each over the
  // 3 MiB bound with the reason files: the oldest goes.
  Plant(store + "/quarantine/1.0__old.tmp.h.1.1/model.neff", 1000,
        absl::Hours(48));
  Age(store + "/quarantine/1.0__old.tmp.h.1.1", absl::Hours(48));
  Plant(store + "/quarantine/1.0__a.tmp.h.1.2", kMiB, absl::Hours(3));
  Plant(store + "/quarantine/1.0__a.tmp.h.1.2.reason", 40, absl::Hours(3));
  Plant(store + "/quarantine/1.0__b.tmp.h.1.3/model.neff", kMiB,
        absl::Hours(2));
  Plant(store + "/quarantine/1.0__b.tmp.h.1.3/reason", 40, absl::Hours(2));
  Age(store + "/quarantine/1.0__b.tmp.h.1.3", absl::Hours(2));
  Plant(store + "/quarantine/1.0__c.tmp.h.1.4", kMiB, absl::Hours(1));
  Plant(store + "/quarantine/1.0__c.tmp.h.1.4.reason", 40, absl::Hours(1));
  // .trash/: what a removal could not delete, long ago and just now.
  Plant(store + "/.trash/old.tmp.h.1.5/model.neff", 500, absl::Hours(2));
  Age(store + "/.trash/old.tmp.h.1.5", absl::Hours(2));
  Plant(store + "/.trash/new.tmp.h.1.6/model.neff", 700, absl::ZeroDuration());

  CommandResult gc = RunNeffctl(daemon, {"--json", "gc"});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  const auto response = FromJson<v1::GcResponse>(gc.out);
  EXPECT_EQ(response.removed_entries(), 0u);
  const v1::Leftovers& removed = response.leftovers_removed();
  EXPECT_EQ(removed.temp_files(), 2u);
  EXPECT_EQ(removed.temp_bytes(), 100300u);
  EXPECT_EQ(removed.quarantine_entries(), 2u);
  EXPECT_EQ(removed.quarantine_bytes(), 1000 + kMiB + 40);
  EXPECT_EQ(removed.trash_entries(), 1u);
  EXPECT_EQ(removed.trash_bytes(), 500u);
  const v1::Leftovers& left = response.leftovers_after();
  EXPECT_EQ(left.temp_files(), 1u);
  EXPECT_EQ(left.temp_bytes(), 5000u);
  EXPECT_EQ(left.quarantine_entries(), 2u);
  EXPECT_EQ(left.quarantine_bytes(), 2 * (kMiB + 40));
  EXPECT_EQ(left.trash_entries(), 1u);
  EXPECT_EQ(left.trash_bytes(), 700u);

  // On disk: exactly those are gone.
  EXPECT_FALSE(fs::exists(kept + "/.kept.neff.tmp.hostx.99.00aa"));
  EXPECT_FALSE(fs::exists(crashed + "/.model.done.tmp.hostx.99.00bb"));
  EXPECT_TRUE(fs::exists(kept + "/.kept.neff.tmp.hostx.98.00cc"));
  EXPECT_FALSE(fs::exists(store + "/quarantine/1.0__old.tmp.h.1.1"));
  EXPECT_FALSE(fs::exists(store + "/quarantine/1.0__a.tmp.h.1.2"));
  EXPECT_FALSE(fs::exists(store + "/quarantine/1.0__a.tmp.h.1.2.reason"));
  EXPECT_TRUE(fs::exists(store + "/quarantine/1.0__b.tmp.h.1.3/model.neff"));
  EXPECT_TRUE(fs::exists(store + "/quarantine/1.0__c.tmp.h.1.4.reason"));
  EXPECT_FALSE(fs::exists(store + "/.trash/old.tmp.h.1.5"));
  EXPECT_TRUE(fs::exists(store + "/.trash/new.tmp.h.1.6"));
  EXPECT_EQ(LookupContent(*stub, "kept"), content);

  // The operator sees what is left.
  CommandResult stats = RunNeffctl(daemon, {"--json", "stats"});
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  const auto s = FromJson<v1::Stats>(stats.out);
  EXPECT_EQ(s.leftovers().SerializeAsString(), left.SerializeAsString())
      << stats.out;
  EXPECT_GT(s.leftovers_measured_unix_ms(), 0);
  CommandResult table = RunNeffctl(daemon, {"stats"});
  EXPECT_TRUE(absl::StrContains(table.out, "temp files")) << table.out;
  EXPECT_TRUE(absl::StrContains(table.out, "quarantine")) << table.out;

  // A dry run after it would remove nothing more.
  CommandResult again = RunNeffctl(daemon, {"--json", "gc", "--dry-run"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const auto dry = FromJson<v1::GcResponse>(again.out);
  EXPECT_EQ(dry.leftovers_removed().temp_files() +
                dry.leftovers_removed().quarantine_entries() +
                dry.leftovers_removed().trash_entries(),
            0u)
      << again.out;
  RecordProperty("temp_files_removed", static_cast<int>(removed.temp_files()));
  RecordProperty("quarantine_removed",
                 static_cast<int>(removed.quarantine_entries()));
  RecordProperty("trash_removed", static_cast<int>(removed.trash_entries()));
}

}  // namespace
}  // namespace neffd::test_support
