// Several real daemons sharing one store, with real rank processes
// (examples/rank_sim): cluster-wide compile dedup, takeover when the host
// holding a cross-host lease dies, and damage behind the daemons' backs.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/harness/store_files.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

// Every OK line of every rank: key -> set of sha256s read.
void CollectReads(Process& rank,
                  std::map<std::string, std::set<std::string>>* reads) {
  for (absl::string_view line : absl::StrSplit(rank.Stdout(), '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() >= 5 && f[0] == "OK") (*reads)[f[2]].insert(f[4]);
  }
}

TEST(SharedStoreTest, FourHostsOfThirtyTwoRanksCompileEachOfSixtyFourKeysOnce) {
  Cluster cluster(TestTempDir(), {"--lease_ttl=10", "--poll_interval=0.2"});
  constexpr int kHosts = 4, kRanks = 32, kGraphs = 64;
  for (int h = 0; h < kHosts; ++h) cluster.AddHost(absl::StrCat("host", h));
  const std::string log = cluster.root() + "/compiles.txt";
  std::vector<std::unique_ptr<Process>> ranks;
  for (int h = 0; h < kHosts; ++h) {
    for (int r = 0; r < kRanks; ++r) {
      ranks.push_back(cluster.StartRank(
          h, h * kRanks + r,
          {absl::StrCat("--graphs=", kGraphs), "--compile_ms=20",
           "--neff_bytes=4096", "--compile_log=" + log}));
    }
  }
  std::map<std::string, std::set<std::string>> reads;
  for (auto& rank : ranks) {
    EXPECT_EQ(rank->Wait(), 0) << rank->Stdout() << rank->Stderr();
    CollectReads(*rank, &reads);
  }
  EXPECT_EQ(ReadLines(log).size(), static_cast<size_t>(kGraphs));
  EXPECT_EQ(reads.size(), static_cast<size_t>(kGraphs));
  for (const auto& [key, shas] : reads) {
    EXPECT_EQ(shas.size(), 1u) << "ranks read different bytes for " << key;
  }
  // How much each host touched the shared store (docs/BENCHMARKS.md).
  for (int h = 0; h < kHosts; ++h) {
    CommandResult stats = RunCommand({Runfile("client/neffctl"),
                                      "--address=" + cluster.host(h).address(),
                                      "--json", "stats"});
    std::printf("host%d stats: %s", h, stats.out.c_str());
  }
}

TEST(SharedStoreTest, HostKilledMidCompileIsTakenOverAndCompiledOnceMore) {
  constexpr double kTtl = 3, kPoll = 0.5;
  Cluster cluster(TestTempDir(), {absl::StrCat("--lease_ttl=", kTtl),
                                  absl::StrCat("--poll_interval=", kPoll)});
  cluster.AddHost("hostA");
  cluster.AddHost("hostB");
  const std::string log = cluster.root() + "/compiles.txt";
  auto slow = cluster.StartRank(
      0, 0, {"--graphs=1", "--compile_ms=60000", "--compile_log=" + log});
  for (int i = 0; i < 500 && ReadLines(log).empty(); ++i) usleep(20000);
  ASSERT_EQ(ReadLines(log).size(), 1u);  // hostA's rank is compiling
  auto waiter = cluster.StartRank(
      1, 1, {"--graphs=1", "--compile_ms=20", "--compile_log=" + log});
  absl::SleepFor(absl::Seconds(2 * kTtl));
  EXPECT_EQ(ReadLines(log).size(), 1u);  // hostB waits for hostA

  const absl::Time killed = absl::Now();
  cluster.host(0).Signal(SIGKILL);
  cluster.host(0).Wait();
  absl::Time took_over = absl::InfiniteFuture();
  for (int i = 0; i < 1000; ++i) {
    if (ReadLines(log).size() == 2) {
      took_over = absl::Now();
      break;
    }
    usleep(10000);
  }
  EXPECT_LE(took_over - killed, absl::Seconds(kTtl + kPoll + 0.5));
  EXPECT_EQ(waiter->Wait(), 0) << waiter->Stdout() << waiter->Stderr();
  EXPECT_TRUE(absl::StrContains(waiter->Stdout(), " compiled "))
      << waiter->Stdout();
  EXPECT_EQ(ReadLines(log).size(), 2u);  // exactly once more
  slow->Signal(SIGKILL);
}

// The key an artifact path names ({k0k1}/{k2k3}/{key}.neff).
std::string FileKey(const std::string& artifact) {
  return fs::path(artifact).stem().string();
}

TEST(SharedStoreTest, DamageBehindTheDaemonsIsNeverServedAndIsRecompiled) {
  Cluster cluster(TestTempDir(), {"--poll_interval=0.2"});
  cluster.AddHost("hostA");
  cluster.AddHost("hostB");
  const std::string log = cluster.root() + "/compiles.txt";
  const std::vector<std::string> args = {"--graphs=8", "--compile_ms=10",
                                         "--neff_bytes=8192",
                                         "--compile_log=" + log};
  ASSERT_EQ(cluster.StartRank(0, 0, args)->Wait(), 0);
  ASSERT_EQ(ReadLines(log).size(), 8u);

  // Every entry's files, by key (store/layout.h).
  std::vector<EntryFiles> entries;
  for (const auto& f :
       fs::recursive_directory_iterator(cluster.shared_neff())) {
    const std::string name = f.path().filename().string();
    if (f.is_regular_file() && absl::EndsWith(name, ".neff") &&
        name[0] != '.') {
      entries.push_back(
          FilesOf(cluster.shared_neff(), f.path().stem().string()));
    }
  }
  std::sort(entries.begin(), entries.end(),
            [](const EntryFiles& a, const EntryFiles& b) {
              return a.artifact < b.artifact;
            });
  ASSERT_EQ(entries.size(), 8u);
  // 1: truncated. 2: one byte flipped, size and mtime restored. 3: model.done
  // deleted (the artifact alone, as an unmodified rank's put: adopted, not
  // compiled again). 4: the artifact deleted (a clear: a miss, not damage).
  ASSERT_EQ(truncate(entries[0].artifact.c_str(), 100), 0);
  {
    const std::string neff = entries[1].artifact;
    struct stat st;
    ASSERT_EQ(stat(neff.c_str(), &st), 0);
    std::fstream f(neff, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(4000);
    f.put('\xff');
    f.close();
    struct timespec times[2] = {st.st_atim, st.st_mtim};
    ASSERT_EQ(utimensat(AT_FDCWD, neff.c_str(), times, 0), 0);
  }
  fs::remove(entries[2].done);
  fs::remove(entries[3].artifact);

  // Ranks on both hosts (hostA has the entries indexed, hostB has not) ask
  // again: every file they read must be right, and each damaged or cleared
  // key is compiled exactly once more.
  std::vector<std::unique_ptr<Process>> ranks;
  for (int r = 0; r < 8; ++r)
    ranks.push_back(cluster.StartRank(r % 2, r, args));
  for (auto& rank : ranks) {
    EXPECT_EQ(rank->Wait(), 0) << rank->Stdout() << rank->Stderr();
    EXPECT_FALSE(absl::StrContains(rank->Stdout(), "TORN"));
  }
  EXPECT_EQ(ReadLines(log).size(), 11u);
  // The keys whose artifact was quarantined, each filed once, though both
  // hosts may judge the same damage at once (store/store.h, Quarantine).
  std::set<std::string> damaged;
  int filed = 0;
  std::string quarantined;  // every reason there, to name a surplus
  for (const auto& q : fs::recursive_directory_iterator(cluster.shared_neff() +
                                                        "/quarantine")) {
    const std::string name = q.path().filename().string();
    if (name == "reason" || absl::EndsWith(name, ".reason")) {
      const std::string item = q.path().parent_path().filename().string();
      damaged.insert(item.substr(0, item.find('.')));
      ++filed;
      absl::StrAppend(&quarantined, q.path().string(), ": ",
                      ReadFile(q.path().string()), "\n");
    }
  }
  // The truncated and the flipped artifact.
  EXPECT_EQ(damaged, (std::set<std::string>{FileKey(entries[0].artifact),
                                            FileKey(entries[1].artifact)}))
      << quarantined;
  EXPECT_EQ(filed, 2) << quarantined;
}

TEST(SharedStoreTest, EachHostReadsAnEntryFromTheSharedStoreOnce) {
  Cluster cluster(TestTempDir(), {"--poll_interval=0.2"});
  cluster.AddHost("hostA");
  cluster.AddHost("hostB");
  constexpr int kGraphs = 4, kRanks = 16, kBytes = 256 << 10;
  const std::vector<std::string> args = {absl::StrCat("--graphs=", kGraphs),
                                         "--compile_ms=10",
                                         absl::StrCat("--neff_bytes=", kBytes)};
  for (size_t h = 0; h < 2; ++h) {
    std::vector<std::unique_ptr<Process>> ranks;
    for (int r = 0; r < kRanks; ++r) {
      ranks.push_back(cluster.StartRank(h, r, args));
    }
    for (auto& rank : ranks) {
      ASSERT_EQ(rank->Wait(), 0) << rank->Stdout() << rank->Stderr();
      // Ranks are handed the host's local copy, not the shared file.
      for (absl::string_view line : absl::StrSplit(rank->Stdout(), '\n')) {
        if (absl::StartsWith(line, "OK")) {
          EXPECT_TRUE(
              absl::StrContains(line, cluster.host(h).local_dir() + "/tier/"))
              << line;
        }
      }
    }
  }
  auto filled = [&](size_t h) -> uint64_t {
    CommandResult stats = RunCommand({Runfile("client/neffctl"),
                                      "--address=" + cluster.host(h).address(),
                                      "--json", "stats"});
    const std::string field = "\"local_tier_filled_bytes\":\"";
    size_t at = stats.out.find(field);
    return at == std::string::npos
               ? ~uint64_t{0}
               : std::stoull(stats.out.substr(at + field.size()));
  };
  // Each host reads each entry from the shared store at most once, however
  // many ranks load it (K x size, not R x K x size). hostA compiled them:
  // its copies mostly come from the staged files.
  EXPECT_LE(filled(0), uint64_t{kGraphs} * kBytes);
  EXPECT_EQ(filled(1), uint64_t{kGraphs} * kBytes);
}

}  // namespace
}  // namespace neffd::test_support
