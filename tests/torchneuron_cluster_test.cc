// Issue 27's acceptance: unmodified TorchNeuron ranks and neffd share one
// store. tests/torchneuron_rank.py replays TorchNeuron's published cache
// algorithm (its key, its layout, its lock directory, its compile through
// `neuronx-cc` on PATH) in processes that link nothing of neffd's; neffcc is
// first on PATH, the fake compiler behind it counts real compiles. Two
// daemons ("hosts") on one store, six ranks per host per graph:
//   - one real compile per graph across both hosts; every rank ends with
//     the same bytes for a graph;
//   - the ranks' own entries (32-hex keys) are hits on both daemons;
//   - after TorchNeuron's cache clear: lookups miss, nothing is
//     quarantined, and a rerun compiles once per graph again.
#include <filesystem>
#include <map>
#include <memory>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

constexpr int kGraphs = 3;
constexpr int kRanksPerHost = 6;

class TorchNeuronClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<Cluster>(
        TestTempDir(), std::vector<std::string>{"--poll_interval=0.2"});
    cluster_->AddHost("hostA");
    cluster_->AddHost("hostB");
    const std::string root = cluster_->root();
    for (const char* dir : {"/mask", "/real", "/ir"}) {
      fs::create_directories(root + dir);
    }
    fs::create_symlink(Runfile("client/neffcc"), root + "/mask/neuronx-cc");
    fs::create_symlink(Runfile("tests/fake_neuronx_cc"),
                       root + "/real/neuronx-cc");
    for (int g = 0; g < kGraphs; ++g) {
      WriteFile(Ir(g), absl::StrCat("HloModule torchneuron_graph_", g, "\n"));
    }
  }

  std::string Ir(int g) const {
    return absl::StrCat(cluster_->root(), "/ir/graph", g, ".hlo.pb");
  }
  std::string Runs() const { return cluster_->root() + "/compiles.txt"; }

  // Every rank of both hosts asks for every graph at once; returns each
  // key's bytes (sha256) as the ranks ended with them.
  std::map<std::string, std::set<std::string>> RunAllRanks() {
    std::vector<std::unique_ptr<Process>> ranks;
    for (size_t h = 0; h < 2; ++h) {
      for (int r = 0; r < kRanksPerHost; ++r) {
        for (int g = 0; g < kGraphs; ++g) {
          std::vector<std::string> env = cluster_->RankEnv(h, r);
          env.push_back(absl::StrCat("PATH=", cluster_->root(), "/mask:",
                                     cluster_->root(), "/real:/usr/bin:/bin"));
          env.push_back("FAKE_NEURONX_CC_RUNS=" + Runs());
          env.push_back("FAKE_NEURONX_CC_SLEEP_MS=300");
          ranks.push_back(std::make_unique<Process>(
              std::vector<std::string>{
                  "/usr/bin/python3", Runfile("tests/torchneuron_rank.py"),
                  "--cache_dir=" + cluster_->shared_neff(),
                  "--local_dir=" + cluster_->host(h).local_dir(),
                  "--ir=" + Ir(g)},
              env));
        }
      }
    }
    std::map<std::string, std::set<std::string>> bytes_by_key;
    for (auto& rank : ranks) {
      EXPECT_EQ(rank->Wait(), 0) << rank->Stdout() << rank->Stderr();
      for (absl::string_view line : absl::StrSplit(rank->Stdout(), '\n')) {
        std::vector<std::string> f = absl::StrSplit(line, ' ');
        if (f.size() == 4 && f[0] == "KEY") bytes_by_key[f[1]].insert(f[3]);
      }
    }
    return bytes_by_key;
  }

  // `neffctl lookup neff KEY` (any compiler version) on host `h`: "HIT",
  // "MISS", or the failure.
  std::string Lookup(size_t h, const std::string& key) {
    CommandResult r = RunCommand({Runfile("client/neffctl"),
                                  "--address=" + cluster_->host(h).address(),
                                  "--json", "lookup", "neff", key});
    if (absl::StrContains(r.out, "\"result\":\"HIT\"")) return "HIT";
    if (r.exit_code == 1 || absl::StrContains(r.out, "MISS")) return "MISS";
    return absl::StrCat("exit ", r.exit_code, ": ", r.out, r.err);
  }

  // A counter of `neffctl --json stats` on host `h`.
  uint64_t StatsField(size_t h, const std::string& name) {
    CommandResult r = RunCommand({Runfile("client/neffctl"),
                                  "--address=" + cluster_->host(h).address(),
                                  "--json", "stats"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const std::string field = "\"" + name + "\":\"";
    const size_t at = r.out.find(field);
    uint64_t value = 0;
    if (at != std::string::npos) {
      const size_t from = at + field.size();
      (void)absl::SimpleAtoi(r.out.substr(from, r.out.find('"', from) - from),
                             &value);
    }
    return value;
  }
  // The daemon's metadata operations on the shared store so far.
  uint64_t StoreOps(size_t h) { return StatsField(h, "store_metadata_ops"); }
  uint64_t Quarantined(size_t h) { return StatsField(h, "quarantined"); }

  // TorchNeuron's clear, as the spec page states it: every regular file
  // whose name ends in ".neff", then empty shard directories two deep.
  void TorchNeuronClear() {
    const std::string cache = cluster_->shared_neff();
    std::vector<fs::path> doomed;
    for (const auto& e : fs::recursive_directory_iterator(cache)) {
      if (e.is_regular_file() && e.path().extension() == ".neff") {
        doomed.push_back(e.path());
      }
    }
    for (const fs::path& p : doomed) fs::remove(p);
    for (const auto& first : fs::directory_iterator(cache)) {
      if (!first.is_directory()) continue;
      for (const auto& second : fs::directory_iterator(first.path())) {
        if (second.is_directory() && fs::is_empty(second.path())) {
          fs::remove(second.path());
        }
      }
      if (fs::is_empty(first.path())) fs::remove(first.path());
    }
  }

  std::unique_ptr<Cluster> cluster_;
};

TEST_F(TorchNeuronClusterTest, UnmodifiedRanksOnTwoHostsShareOneStore) {
  std::map<std::string, std::set<std::string>> first = RunAllRanks();
  ASSERT_EQ(first.size(), static_cast<size_t>(kGraphs));
  for (const auto& [key, shas] : first) {
    EXPECT_EQ(key.size(), 32u) << key;
    EXPECT_EQ(shas.size(), 1u) << key << ": ranks ended with other bytes";
  }
  EXPECT_EQ(ReadLines(Runs()).size(), static_cast<size_t>(kGraphs))
      << "one real compile per graph across both hosts";
  // The ranks' own entries are neffd's: hits on both daemons by 32-hex key,
  // each found with a few metadata operations on the store (never a
  // listing): the first lookup on a host hashes and records it, later ones
  // check it.
  for (size_t h = 0; h < 2; ++h) {
    for (int pass = 0; pass < 2; ++pass) {
      const uint64_t before = StoreOps(h);
      for (const auto& [key, shas] : first) {
        EXPECT_EQ(Lookup(h, key), "HIT") << key;
      }
      const double per_lookup =
          static_cast<double>(StoreOps(h) - before) / first.size();
      std::printf("host %zu, %s lookup: %.1f store metadata ops per key\n", h,
                  pass == 0 ? "first" : "repeated", per_lookup);
      // The counter is the daemon's: its background work (lease polls,
      // journal flushes) lands in the window too. A listing of the store
      // would cost at least the shard directories (dozens) per lookup.
      EXPECT_LE(per_lookup, pass == 0 ? 12.0 : 4.0);
    }
  }

  // neffcc's own entries (64-hex keys) are in the same store.
  std::vector<std::string> keys;
  for (const auto& e :
       fs::recursive_directory_iterator(cluster_->shared_neff())) {
    if (e.is_regular_file() && e.path().extension() == ".neff") {
      keys.push_back(e.path().stem().string());
    }
  }
  EXPECT_EQ(keys.size(), static_cast<size_t>(2 * kGraphs));

  TorchNeuronClear();
  // Both daemons see every key as a miss once they look again (a host
  // re-checks a hot entry's shared copy within a second).
  for (const std::string& key : keys) {
    for (size_t h = 0; h < 2; ++h) {
      EXPECT_TRUE(WaitUntil([&] { return Lookup(h, key) == "MISS"; },
                            absl::Seconds(30)))
          << key << " on host " << h << ": " << Lookup(h, key);
    }
  }
  EXPECT_EQ(Quarantined(0) + Quarantined(1), 0u) << "a clear is not damage";

  std::map<std::string, std::set<std::string>> again = RunAllRanks();
  EXPECT_EQ(ReadLines(Runs()).size(), static_cast<size_t>(2 * kGraphs))
      << "the rerun compiles once per graph";
  EXPECT_EQ(again, first);  // the same keys, the same bytes
  for (const auto& [key, shas] : again) {
    for (size_t h = 0; h < 2; ++h) EXPECT_EQ(Lookup(h, key), "HIT") << key;
  }
  EXPECT_EQ(Quarantined(0) + Quarantined(1), 0u);
  EXPECT_FALSE(fs::exists(cluster_->shared_neff() + "/quarantine"));
}

}  // namespace
}  // namespace neffd::test_support
