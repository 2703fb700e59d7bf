// Operator maintenance on a real daemon: importing a generated 2,000-entry
// libneuronxla-style cache, and gc under concurrent readers.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/file_util.h"
#include "store/lock_paths.h"
#include "tests/faults/wire.h"
#include "tests/harness/process.h"
#include "tests/harness/store_files.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

void Write(const std::string& path, const std::string& content,
           absl::Duration age = absl::ZeroDuration()) {
  WriteFile(path, content);
  if (age > absl::ZeroDuration()) {
    struct timespec t[2];
    t[0] = t[1] = absl::ToTimespec(absl::Now() - age);
    utimensat(AT_FDCWD, path.c_str(), t, 0);
  }
}

std::string DoneJson(const std::string& content, uint64_t size) {
  return absl::StrCat("{\"size\":\"", size, "\",\"sha256\":\"",
                      Sha256Hex(content), "\"}");
}

v1::EntryId Id(const std::string& key) {
  return test_support::Id("neff", "2.14.0", key);
}

// Issue 27, item 7: `neffctl import` moves a store written in the layout
// before TorchNeuron's (neuronxcc-V/MODULE_K/) into it.
TEST(ImportTest, TwoThousandOldLayoutEntriesOfEveryKindAreMigratedAndServed) {
  const std::string root = NewTempDir("import");
  const std::string cache = root + "/neff/neuronxcc-2.14.0";
  // kind -> how many; keys are "{kind}{i}". Import has no batches or
  // windows whose edges a larger store would cross; each entry costs its
  // fsyncs (5 ms here), so 10,000 entries cost the suite 100 s under ASan.
  const std::vector<std::pair<std::string, int>> kinds = {
      {"done", 1000},  {"emptydone", 200}, {"legacy", 200}, {"failed", 200},
      {"locked", 200}, {"noneff", 100},    {"badsize", 100}};
  for (const auto& [kind, count] : kinds) {
    for (int i = 0; i < count; ++i) {
      const std::string dir = absl::StrCat(cache, "/MODULE_", kind, i);
      fs::create_directories(dir);
      const std::string neff = absl::StrCat("neff of ", kind, i);
      if (kind == "done" || kind == "locked") {
        Write(dir + "/model.neff", neff);
        Write(dir + "/model.done", DoneJson(neff, neff.size()));
        if (kind == "locked") Write(dir + "/neffd.lease", "h 1 l 0");
      } else if (kind == "emptydone") {
        Write(dir + "/model.neff", neff);
        Write(dir + "/model.done", "");
      } else if (kind == "legacy") {
        Write(dir + "/model.neff", neff);
        Write(dir + "/model.hlo.pb", "hlo");
        Write(dir + "/compile_flags.txt", "--O1");
      } else if (kind == "failed") {
        Write(dir + "/model.hlo.pb", "hlo");
        Write(dir + "/model.log", "ERROR: unsupported op");
      } else if (kind == "noneff") {
        Write(dir + "/model.done", DoneJson(neff, neff.size()));
      } else {  // badsize
        Write(dir + "/model.neff", neff);
        Write(dir + "/model.done", DoneJson(neff, neff.size() + 1));
      }
    }
  }
  DaemonProcess daemon(root);
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  std::vector<std::string> ctl = daemon.NeffctlArgv();
  ctl.push_back("--json");
  auto import = [&]() {
    std::vector<std::string> argv = ctl;
    argv.push_back("import");
    argv.push_back(root + "/neff");
    return RunCommand(argv);
  };
  const absl::Time start = absl::Now();
  CommandResult first = import();
  std::printf("import of 2,000 entries took %s\n",
              absl::FormatDuration(absl::Now() - start).c_str());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  for (const char* field :
       {"\"migrated\":\"1400\"", "\"scanned\":\"1400\"", "\"done\":\"1400\"",
        "\"locked\":\"200\"", "\"corrupt\":\"100\""}) {
    EXPECT_TRUE(absl::StrContains(first.out, field)) << field << first.out;
  }
  // Moved: nothing of them is left in the old layout, and each is in
  // TorchNeuron's. A locked entry waits for its holder; a failure or an
  // entry without its artifact is left alone; a damaged one is quarantined.
  EXPECT_FALSE(fs::exists(cache + "/MODULE_done0"));
  EXPECT_TRUE(fs::exists(FilesOf(root + "/neff", "done0").artifact));
  EXPECT_TRUE(fs::exists(FilesOf(root + "/neff", "legacy0").done));
  EXPECT_TRUE(fs::exists(cache + "/MODULE_locked0/model.neff"));
  EXPECT_TRUE(fs::exists(cache + "/MODULE_failed0/model.log"));
  EXPECT_FALSE(fs::exists(FilesOf(root + "/neff", "badsize0").artifact));

  // Every moved entry is a hit.
  auto stub = daemon.NewStub();
  int hits = 0;
  for (const auto& [kind, count] : std::vector<std::pair<std::string, int>>{
           {"done", 1000}, {"emptydone", 200}, {"legacy", 200}}) {
    for (int i = 0; i < count; ++i) {
      v1::LookupRequest request;
      *request.mutable_id() = Id(absl::StrCat(kind, i));
      v1::LookupResponse response;
      grpc::ClientContext context;
      if (stub->Lookup(&context, request, &response).ok() &&
          response.result() == v1::LookupResponse::HIT) {
        ++hits;
      }
    }
  }
  EXPECT_EQ(hits, 1400);
  CommandResult stats = RunCommand({ctl[0], ctl[1], "--json", "stats"});
  EXPECT_TRUE(absl::StrContains(stats.out, "\"entries\":\"1400\""))
      << stats.out;
  CommandResult again = import();  // idempotent
  EXPECT_EQ(again.exit_code, 0);
  EXPECT_TRUE(absl::StrContains(again.out, "\"migrated\":\"0\"")) << again.out;
  EXPECT_TRUE(absl::StrContains(again.out, "\"done\":\"1400\""));
  CommandResult bad = RunCommand({ctl[0], ctl[1], ctl[2], "import", "/etc"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(bad.err, "not this daemon's cache dir"));
}

class GcTest : public ::testing::Test {
 protected:
  void Publish(const std::string& key, const std::string& bytes) {
    ASSERT_TRUE(PublishInline(*stub_, Id(key), bytes).ok());
  }

  std::unique_ptr<v1::CompileCache::Stub> stub_;
};

TEST_F(GcTest, GcUnderConcurrentReadersNeverBreaksOneAndSkipsLockedEntries) {
  const std::string root = NewTempDir("gc");
  DaemonProcess daemon(root, {"--gc_recent_seconds=1"});
  ASSERT_TRUE(daemon.Start());
  stub_ = daemon.NewStub();
  constexpr int kEntries = 40;
  constexpr size_t kSize = 64 << 10;
  auto content = [](int i) {
    return std::string(kSize, static_cast<char>('a' + i % 26)) +
           absl::StrCat(i);
  };
  for (int i = 0; i < kEntries; ++i) Publish(absl::StrCat("k", i), content(i));
  auto files = [&root](int i) {
    return FilesOf(root + "/neff", absl::StrCat("k", i));
  };
  // Another host is compiling k5, the least recently used, again (its lease
  // file is there).
  WriteFile(files(5).lease, "hostB 1 x 0");
  // Readers that opened cold entries before gc must finish after it.
  std::vector<int> held_fds;
  for (int i = 10; i < 20; ++i) {
    held_fds.push_back(open(files(i).artifact.c_str(), O_RDONLY));
  }
  absl::SleepFor(absl::Seconds(1.5));  // everything is now "not recent"

  // Hot readers on k0..k4 look up, open and verify continuously.
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, broken{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 4; ++t) {
    readers.emplace_back([&, t] {
      auto stub = daemon.NewStub();
      for (int n = 0; !stop; ++n) {
        const int i = (t + n) % 5;
        v1::LookupRequest request;
        *request.mutable_id() = Id(absl::StrCat("k", i));
        v1::LookupResponse response;
        grpc::ClientContext context;
        if (!stub->Lookup(&context, request, &response).ok() ||
            response.result() != v1::LookupResponse::HIT ||
            Sha256Hex(ReadFile(response.entry().path())) !=
                Sha256Hex(content(i))) {
          ++broken;
        }
        ++reads;
      }
    });
  }
  absl::SleepFor(absl::Milliseconds(300));
  const uint64_t limit = 10 * kSize;
  CommandResult gc =
      RunCommand({Runfile("client/neffctl"), "--address=" + daemon.address(),
                  "--admin_address=" + daemon.admin_address(), "--json", "gc",
                  absl::StrCat("--max-size=", limit)});
  absl::SleepFor(absl::Milliseconds(300));
  stop = true;
  for (auto& r : readers) r.join();
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  std::printf("gc: %s", gc.out.c_str());
  EXPECT_GT(reads.load(), 0);
  EXPECT_EQ(broken.load(), 0);
  EXPECT_TRUE(absl::StrContains(gc.out, "\"skipped_locked\":\"1\""));
  EXPECT_TRUE(fs::exists(files(5).artifact));  // locked: kept
  for (int i = 0; i < 5; ++i) {
    EXPECT_TRUE(fs::exists(files(i).artifact));  // hot
  }
  uint64_t bytes = 0;
  for (const auto& e : fs::recursive_directory_iterator(root + "/neff")) {
    if (e.is_regular_file() && e.path().extension() == ".neff") {
      bytes += fs::file_size(e.path());
    }
  }
  EXPECT_LE(bytes, limit);
  // Readers that had opened removed entries still read every byte.
  for (size_t j = 0; j < held_fds.size(); ++j) {
    std::string got(kSize + 8, '\0');
    ssize_t n = pread(held_fds[j], got.data(), got.size(), 0);
    ASSERT_GT(n, 0);
    got.resize(n);
    EXPECT_EQ(got, content(10 + j));
    close(held_fds[j]);
  }
  EXPECT_FALSE(fs::exists(files(10).artifact));  // it was collected
  EXPECT_FALSE(fs::exists(files(10).records));
}

}  // namespace
}  // namespace neffd::test_support

namespace neffd::test_support {
namespace {

TEST(PeriodicGcTest, DaemonKeepsTheStoreUnderMaxCacheSize) {
  const std::string root = NewTempDir("periodic_gc");
  DaemonProcess daemon(root, {"--max_cache_size=1000", "--gc_interval=1",
                              "--gc_recent_seconds=0"});
  ASSERT_TRUE(daemon.Start());
  WriteFile(root + "/big", std::string(5000, 'x'));
  ASSERT_EQ(
      RunCommand({Runfile("client/neffctl"), "--address=" + daemon.address(),
                  "put", "neff", "big", root + "/big", "--compiler_version=1"})
          .exit_code,
      0);
  const std::string neff = FilesOf(root + "/neff", "big").artifact;
  for (int i = 0; i < 100 && fs::exists(neff); ++i) usleep(50000);
  EXPECT_FALSE(fs::exists(neff));
}

}  // namespace
}  // namespace neffd::test_support
