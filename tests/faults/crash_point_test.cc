// Crash points of a publish (issue 18, part 3): a test build of neffd
// (neffd_crash_points) SIGKILLs itself at one step of a publish
// (store/testing/crash_point_env.h: temp written, data synced, renamed,
// directory synced, done written, done synced, done renamed, published).
// After a restart of the plain daemon the entry is a miss if the daemon died
// before the artifact's rename, and whole (its bytes on the store are the
// published bytes, verified before the rename) from then on, adopted if its
// model.done is missing; never anything else. A missed key is then
// published afresh and is a hit; `neffctl gc` sweeps the temp files the
// crash left, and the entry stays a hit.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/testing/crash_point_env.h"
#include "tests/faults/wire.h"
#include "tests/harness/process.h"
#include "tests/harness/store_files.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

std::string RandomBytes(size_t size, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(rng());
  return bytes;
}

// Names beside the entry's artifact and in its records that a publish
// writes before it is complete.
std::vector<std::string> TempFiles(const EntryFiles& files) {
  std::vector<std::string> found;
  for (const std::string& dir : {files.shard, files.records}) {
    if (!fs::exists(dir)) continue;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      if (absl::StrContains(name, ".tmp.")) found.push_back(name);
    }
  }
  return found;
}

class CrashPointTest : public ::testing::TestWithParam<CrashPoint> {};

TEST_P(CrashPointTest, AfterRestartTheEntryIsAbsentOrWhole) {
  const CrashPoint& point = GetParam();
  const auto& points = PublishCrashPoints();
  const auto position =
      std::find_if(points.begin(), points.end(),
                   [&](const CrashPoint& p) { return p.name == point.name; });
  // The artifact's rename is the commit: its bytes were verified before it,
  // so a process crash after it keeps the entry (the page cache survives;
  // a lookup records what model.done does not), one before it leaves none.
  const bool committed =
      position - points.begin() >=
      std::find_if(points.begin(), points.end(), [](const CrashPoint& p) {
        return p.name == "renamed";
      }) - points.begin();
  const std::string root = NewTempDir("crash_" + point.name);
  DaemonProcess crashing(root, {"--lease_ttl=3"},
                         {"NEFFD_TEST_CRASH_AT=" + point.name});
  crashing.set_binary("tests/faults/neffd_crash_points");
  ASSERT_TRUE(crashing.Start()) << crashing.process().Stderr();
  const std::string content = RandomBytes(1 << 20, 18);
  {
    auto stub = crashing.NewStub();
    grpc::Status published =
        PublishStaged(*stub, GrantLease(*stub, "torn"), content);
    EXPECT_FALSE(published.ok()) << "the client heard PUBLISHED";
  }
  EXPECT_EQ(crashing.Wait(), 128 + SIGKILL);
  ASSERT_TRUE(absl::StrContains(crashing.process().Stderr(),
                                "crash_point name=" + point.name))
      << crashing.process().Stderr();

  // The restarted daemon calls a temp file orphaned after a second, so the
  // test can see gc sweep what the crash left.
  DaemonProcess restarted(root, {"--lease_ttl=3", "--gc_temp_grace=1"});
  restarted.set_binary("daemon/neffd");
  ASSERT_TRUE(restarted.Start()) << restarted.process().Stderr();
  auto stub = restarted.NewStub();
  const EntryFiles files = FilesOf(crashing.neff_dir(), "torn");
  v1::LookupResponse::Result result;
  const std::string served = LookupContent(*stub, "torn", &result);
  std::string expected = content;
  if (committed) {
    EXPECT_EQ(result, v1::LookupResponse::HIT);
    EXPECT_TRUE(served == content) << "served bytes differ";
    EXPECT_TRUE(ReadFile(files.artifact) == content)
        << "the store's bytes differ";
  } else {
    EXPECT_EQ(result, v1::LookupResponse::MISS);
    EXPECT_EQ(served, "");
    // Published afresh, the key is a hit with the new bytes.
    const std::string again = RandomBytes(1 << 20, 81);
    ASSERT_TRUE(PublishStaged(*stub, GrantLease(*stub, "torn"), again).ok());
    EXPECT_TRUE(LookupContent(*stub, "torn") == again);
    EXPECT_TRUE(ReadFile(files.artifact) == again);
    expected = again;
  }
  const size_t left = TempFiles(files).size();
  EXPECT_TRUE(WaitUntil(
      [&] {
        return RunNeffctl(restarted, {"gc"}).exit_code == 0 &&
               TempFiles(files).empty();
      },
      absl::Seconds(10)))
      << "temp files left by the crash were not swept";
  // The sweep took nothing of the entry.
  EXPECT_TRUE(LookupContent(*stub, "torn") == expected);
  RecordProperty("temp_files_swept", static_cast<int>(left));
}

INSTANTIATE_TEST_SUITE_P(Publish, CrashPointTest,
                         ::testing::ValuesIn(PublishCrashPoints()),
                         [](const ::testing::TestParamInfo<CrashPoint>& info) {
                           return info.param.name;
                         });

}  // namespace
}  // namespace neffd::test_support
