// Cluster gc (issue 22) with real daemons sharing one store
// (tests/harness/cluster.h): one evictor at a time, recency from every
// host's access journal, takeover of the gc lease after its holder dies,
// and what `neffctl gc` reports.
#include <signal.h>
#include <sys/stat.h>
#include <utime.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/harness/store_files.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

constexpr int kLeaseTtl = 3;
constexpr int kGcInterval = 1;

std::string TestName() {
  return ::testing::UnitTest::GetInstance()->current_test_info()->name();
}

// The host named in the store's gc lease file, or "".
std::string GcHolder(const Cluster& cluster) {
  std::ifstream in(cluster.shared_neff() + "/.neffd-gc.lease");
  std::string host;
  in >> host;
  return host;
}

// Waits until `done` holds; false after `limit`.
bool AwaitTrue(const std::function<bool()>& done, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return done();
}

// Bytes of the artifacts in the shared neff store. The daemons' gc renames
// and deletes entries while this walks: a file gone before it is measured
// counts nothing, and a walk that loses its place starts over (stopping
// early would undercount).
uint64_t StoreBytes(const Cluster& cluster) {
  std::error_code walk;
  for (int attempt = 0; attempt < 100; ++attempt) {
    uint64_t total = 0;
    walk.clear();
    for (fs::recursive_directory_iterator it(cluster.shared_neff(), walk), end;
         !walk && it != end; it.increment(walk)) {
      const std::string name = it->path().filename().string();
      if (name[0] == '.' || !absl::EndsWith(name, ".neff")) continue;
      std::error_code gone;
      const uint64_t size = fs::file_size(it->path(), gone);
      if (!gone) total += size;
    }
    if (!walk) return total;
  }
  ADD_FAILURE() << "cannot walk " << cluster.shared_neff() << ": "
                << walk.message();
  return 0;
}

CommandResult Ctl(DaemonProcess& host, std::vector<std::string> args) {
  std::vector<std::string> argv = host.NeffctlArgv();
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

void Put(const Cluster& cluster, DaemonProcess& host, const std::string& key,
         size_t bytes) {
  const std::string file = absl::StrCat(cluster.root(), "/", key, ".neff");
  std::ofstream(file) << std::string(bytes, key[0]) << key;
  CommandResult put =
      Ctl(host, {"put", "neff", key, file, "--compiler_version=2.19.1"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
}

struct GcRun {
  std::string ns, host, lease_id;
  int64_t start_ms = 0, end_ms = 0;
};

// The gc_end lines of a daemon's log.
std::vector<GcRun> GcRuns(const std::string& log) {
  std::vector<GcRun> runs;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (!absl::StrContains(line, "event=gc_end")) continue;
    GcRun run;
    for (absl::string_view field : absl::StrSplit(line, ' ')) {
      std::pair<std::string, std::string> kv = absl::StrSplit(field, '=');
      if (kv.first == "ns") run.ns = kv.second;
      if (kv.first == "host") run.host = kv.second;
      if (kv.first == "lease_id") run.lease_id = kv.second;
      if (kv.first == "start_unix_ms")
        (void)absl::SimpleAtoi(kv.second, &run.start_ms);
      if (kv.first == "end_unix_ms")
        (void)absl::SimpleAtoi(kv.second, &run.end_ms);
    }
    runs.push_back(run);
  }
  return runs;
}

// Starts host "a" and waits until it holds the store's gc lease, so that
// hosts added later are not the store's evictor.
bool StartEvictor(Cluster& cluster) {
  cluster.AddHost("a");
  return AwaitTrue([&] { return GcHolder(cluster) == "a"; }, absl::Seconds(10));
}

std::vector<std::string> Flags(uint64_t cap) {
  return {absl::StrCat("--lease_ttl=", kLeaseTtl),
          absl::StrCat("--gc_interval=", kGcInterval),
          absl::StrCat("--max_cache_size=", cap),
          // Above the journals' first-use lag (10 s Catalog flush + 0.5 s).
          "--gc_recent_seconds=15", "--access_journal_grain=1",
          "--access_journal_spacing=0.5", "--poll_interval=0.2", "--v=2"};
}

TEST(ClusterGcTest, OneEvictorKeepsTheCapAndSparesAnEntryServedElsewhere) {
  constexpr uint64_t kEntry = 1 << 20, kCap = 8 * kEntry;
  Cluster cluster(NewTempDir(TestName()), Flags(kCap));
  // The entry in use on host d is at the mercy of another host's gc.
  ASSERT_TRUE(StartEvictor(cluster));
  for (const char* name : {"b", "c", "d"}) cluster.AddHost(name);
  DaemonProcess& d = cluster.host(3);
  Put(cluster, d, "hot", kEntry);  // the oldest entry: LRU's first victim

  std::atomic<bool> stop{false};
  std::atomic<int> reads{0}, misses{0};
  std::thread reader([&] {
    while (!stop) {
      CommandResult hit =
          Ctl(d, {"lookup", "neff", "hot", "--compiler_version=2.19.1"});
      ++reads;
      if (hit.exit_code != 0) ++misses;
      absl::SleepFor(absl::Milliseconds(500));
    }
  });
  // A failed ASSERT returns early: the reader must still be joined.
  struct JoinOnExit {
    std::atomic<bool>& stop;
    std::thread& thread;
    ~JoinOnExit() {
      stop = true;
      if (thread.joinable()) thread.join();
    }
  } join_on_exit{stop, reader};
  for (int i = 0; i < 30; ++i) {
    Put(cluster, cluster.host(i % 3), absl::StrCat("cold", i), kEntry);
  }
  // Entries are protected for gc_recent (15 s) after their last use.
  EXPECT_TRUE(
      AwaitTrue([&] { return StoreBytes(cluster) <= kCap; }, absl::Seconds(60)))
      << StoreBytes(cluster);
  // Several more gc turns: the cap holds and the hot entry stays.
  const int runs_before =
      static_cast<int>(GcRuns(cluster.host(0).process().Stderr()).size());
  ASSERT_TRUE(AwaitTrue(
      [&] {
        EXPECT_LE(StoreBytes(cluster), kCap);
        return static_cast<int>(
                   GcRuns(cluster.host(0).process().Stderr()).size()) >=
               runs_before + 4;
      },
      // Gc turns are slower under the sanitizers.
      absl::Seconds(120)));
  stop = true;
  reader.join();
  EXPECT_GT(reads, 20);
  EXPECT_EQ(misses, 0) << "the entry read through host d was evicted";
  EXPECT_TRUE(fs::exists(FilesOf(cluster.shared_neff(), "hot").done));

  // No two gc runs of one store overlapped, across all four logs; the
  // others skipped. (Each store has its own gc lease: the NEFF store's runs
  // and the HLO store's may overlap, on one host or two.)
  std::vector<GcRun> runs;
  for (size_t h = 0; h < cluster.size(); ++h) {
    std::vector<GcRun> host_runs = GcRuns(cluster.host(h).process().Stderr());
    runs.insert(runs.end(), host_runs.begin(), host_runs.end());
    if (h > 0) {
      EXPECT_TRUE(absl::StrContains(cluster.host(h).process().Stderr(),
                                    "event=gc_skipped"));
    }
  }
  ASSERT_GE(runs.size(), 5u);
  std::sort(runs.begin(), runs.end(), [](const GcRun& x, const GcRun& y) {
    return std::tie(x.ns, x.start_ms) < std::tie(y.ns, y.start_ms);
  });
  for (size_t i = 1; i < runs.size(); ++i) {
    if (runs[i - 1].ns != runs[i].ns) continue;
    EXPECT_LE(runs[i - 1].end_ms, runs[i].start_ms)
        << runs[i - 1].ns << " " << runs[i - 1].host << " "
        << runs[i - 1].lease_id << " overlaps " << runs[i].host << " "
        << runs[i].lease_id;
  }
}

TEST(ClusterGcTest, AHostThatDiesHoldingTheGcLeaseIsReplacedAfterTheTtl) {
  Cluster cluster(NewTempDir(TestName()), Flags(uint64_t{1} << 40));
  ASSERT_TRUE(StartEvictor(cluster));
  cluster.AddHost("b");
  cluster.AddHost("c");
  ASSERT_TRUE(AwaitTrue(
      [&] {
        return absl::StrContains(cluster.host(1).process().Stderr(),
                                 "event=gc_skipped");
      },
      absl::Seconds(10)));
  const absl::Time killed = absl::Now();
  cluster.host(0).Signal(SIGKILL);
  cluster.host(0).Wait();
  ASSERT_TRUE(AwaitTrue(
      [&] {
        const std::string h = GcHolder(cluster);
        return h == "b" || h == "c";
      },
      absl::Seconds(30)));
  const absl::Duration took = absl::Now() - killed;
  // Not before the lease went unrefreshed for its TTL (the last refresh
  // was at most TTL/3 before the kill); within a TTL and a gc turn or two.
  EXPECT_GE(took, absl::Seconds(kLeaseTtl) - absl::Seconds(kLeaseTtl) / 3);
  EXPECT_LE(took, absl::Seconds(kLeaseTtl + 2 * kGcInterval + 1));
}

TEST(ClusterGcTest, NeffctlGcNamesTheHolderOrSaysWhatItRemovedAndWhy) {
  Cluster cluster(NewTempDir(TestName()), Flags(uint64_t{1} << 40));
  ASSERT_TRUE(StartEvictor(cluster));
  cluster.AddHost("b");
  // Two cheap and two dear compiles, published through host b.
  for (auto [version, ms] : {std::pair<std::string, int>{"cheap", 20},
                             std::pair<std::string, int>{"dear", 700}}) {
    auto rank = cluster.StartRank(
        1, 0,
        {"--graphs=2", absl::StrCat("--compile_ms=", ms), "--neff_bytes=65536",
         "--compiler_version=" + version});
    ASSERT_EQ(rank->Wait(), 0) << rank->Stdout() << rank->Stderr();
  }
  // All four last used at the same moment, long ago: equally cold.
  const time_t then = time(nullptr) - 7200;
  const struct utimbuf times = {then, then};
  for (const auto& f :
       fs::recursive_directory_iterator(cluster.shared_neff())) {
    if (f.path().filename() == "model.done") {
      ASSERT_EQ(utime(f.path().c_str(), &times), 0);
    }
  }

  CommandResult refused = Ctl(cluster.host(1), {"gc", "--max_size=131072"});
  EXPECT_EQ(refused.exit_code, 4);
  EXPECT_TRUE(absl::StrContains(refused.err, "held by host a")) << refused.err;

  CommandResult gc = Ctl(cluster.host(0), {"gc", "--max_size=131072"});
  ASSERT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_TRUE(absl::StrContains(gc.out, "removed 2 of 4 entries")) << gc.out;
  EXPECT_TRUE(absl::StrContains(gc.out, "of host a")) << gc.out;
  // The cheapest to recompile went first, each with its reason.
  std::vector<std::string> lines = absl::StrSplit(gc.out, '\n');
  int cheap = 0;
  for (const std::string& line : lines) {
    if (!absl::StartsWith(line, "  ")) continue;
    EXPECT_TRUE(absl::StrContains(line, "over the size goal")) << line;
    EXPECT_TRUE(absl::StrContains(line, "never served")) << line;
    if (absl::StartsWith(line, "  cheap/")) ++cheap;
  }
  EXPECT_EQ(cheap, 2) << gc.out;
  // The dear ones stayed.
  int dear = 0;
  for (const auto& f :
       fs::recursive_directory_iterator(cluster.shared_neff())) {
    if (f.path().filename() == "model.done") {
      EXPECT_TRUE(absl::StrContains(ReadFile(f.path()), "\"dear\""))
          << f.path();
      ++dear;
    }
  }
  EXPECT_EQ(dear, 2);
}

}  // namespace
}  // namespace neffd::test_support
