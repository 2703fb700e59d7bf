// Issue 27, item 6, the acceptance: ranks whose TorchNeuron cache is swapped
// for neffd's adapter (tests/torchneuron_adapter_rank.py, through the Python
// module's TorchNeuronCache) and unmodified TorchNeuron ranks
// (tests/torchneuron_rank.py, linking nothing of neffd's) on one host, asking
// for the same graphs:
//   - exactly one compile per key, counted from every rank's COMPILED lines,
//     with the daemon and with the daemon down (the filesystem fallback);
//   - an unmodified rank that misses while an adapter rank holds the lease
//     waits, then reads the adapter rank's entry without compiling;
//   - the module's TorchNeuronCache surface (get/put/exists/remove/clear,
//     acquire_lock, LockTimeoutError).
// Each test runs once per module: the pybind11 extension and the portable
// ctypes module over libneffclient.so (the C ABI), under python3.
#include <signal.h>

#include <algorithm>
#include <map>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"
#include "tests/torchneuron_host.h"

namespace neffd::test_support {
namespace {

constexpr int kKeys = 4;
constexpr int kAdapterRanks = 4;
constexpr int kUnmodifiedRanksPerKey = 3;

std::vector<std::string> Keys() {
  std::vector<std::string> keys;
  for (int i = 0; i < kKeys; ++i) {
    keys.push_back(absl::StrCat(i, std::string(30, 'a'), i));
  }
  return keys;
}

class TorchNeuronAdapterTest
    : public TorchNeuronHost<::testing::TestWithParam<bool>> {
 protected:
  std::vector<std::string> Env() const {
    std::vector<std::string> env = NeffclientPythonEnv(GetParam());
    env.push_back("NEFFD_ADDRESS=" + address_);
    env.push_back("TORCH_NEURONX_NEFF_CACHE_DIR=" + daemon_->neff_dir());
    env.push_back("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR=" + daemon_->local_dir());
    env.push_back("TORCH_NEURONX_DEBUG_DIR=" + root_ + "/debug");
    return env;
  }

  std::unique_ptr<Process> AdapterRank(const std::vector<std::string>& keys,
                                       const std::string& hold_until = "") {
    std::vector<std::string> argv = {
        "/usr/bin/python3", Runfile("tests/torchneuron_adapter_rank.py"),
        "--keys=" + absl::StrJoin(keys, ","), "--compile_ms=200"};
    if (!hold_until.empty()) argv.push_back("--hold_until=" + hold_until);
    return std::make_unique<Process>(argv, Env());
  }

  // The NEFF is the adapter ranks' ("NEFF:<key>"), so both kinds agree.
  std::unique_ptr<Process> Rank(const std::string& key) {
    return UnmodifiedRank(key, "", "NEFF:" + key);
  }

  // Starts both kinds of rank on every key, waits for all, and returns who
  // compiled each key ("adapter" or "unmodified", once per compile).
  std::map<std::string, std::vector<std::string>> RunFleet() {
    const std::vector<std::string> keys = Keys();
    std::vector<std::unique_ptr<Process>> adapters;
    std::vector<std::pair<std::string, std::unique_ptr<Process>>> unmodified;
    for (int r = 0; r < kAdapterRanks; ++r) {
      std::vector<std::string> order = keys;  // each rank its own order
      std::rotate(order.begin(), order.begin() + r % kKeys, order.end());
      adapters.push_back(AdapterRank(order));
    }
    // The unmodified ranks come once an adapter rank holds a key, so both
    // kinds compile and both kinds wait for the other.
    EXPECT_TRUE(WaitUntil(
        [&] {
          for (auto& rank : adapters) {
            if (absl::StrContains(rank->Stdout(), "LOCKED")) return true;
          }
          return false;
        },
        absl::Seconds(60)));
    for (int r = 0; r < kUnmodifiedRanksPerKey; ++r) {
      for (const std::string& key : keys) {
        unmodified.emplace_back(key, Rank(key));
      }
    }
    std::map<std::string, std::vector<std::string>> compiles;
    for (auto& rank : adapters) {
      EXPECT_EQ(rank->Wait(), 0) << rank->Stderr();
      for (absl::string_view line : absl::StrSplit(rank->Stdout(), '\n')) {
        if (absl::ConsumePrefix(&line, "COMPILED ")) {
          compiles[std::string(line)].push_back("adapter");
        }
        EXPECT_FALSE(absl::StartsWith(line, "BAD")) << line;
      }
    }
    for (auto& [key, rank] : unmodified) {
      EXPECT_EQ(rank->Wait(), 0) << rank->Stderr();
      if (absl::StrContains(rank->Stdout(), "COMPILED")) {
        compiles[key].push_back("unmodified");
      }
    }
    for (const std::string& key : keys) {
      const std::string path =
          absl::StrCat(daemon_->neff_dir(), "/", key.substr(0, 2), "/",
                       key.substr(2, 2), "/", key, ".neff");
      EXPECT_EQ(ReadFile(path), "NEFF:" + key);
    }
    return compiles;
  }

  void ExpectOneCompilePerKey(
      const std::map<std::string, std::vector<std::string>>& compiles) {
    for (const std::string& key : Keys()) {
      auto it = compiles.find(key);
      EXPECT_EQ(it == compiles.end() ? 0 : it->second.size(), 1u) << key;
    }
    EXPECT_EQ(compiles.size(), static_cast<size_t>(kKeys));
    int by_adapter = 0;
    for (const auto& [key, by] : compiles) {
      by_adapter += by == std::vector<std::string>{"adapter"};
    }
    EXPECT_GE(by_adapter, 1);  // the key an adapter rank held first
  }

  std::string address_;
};

INSTANTIATE_TEST_SUITE_P(Modules, TorchNeuronAdapterTest,
                         ::testing::Values(false, true),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return std::string(info.param ? "ctypes"
                                                         : "pybind11");
                         });

TEST_P(TorchNeuronAdapterTest, AdapterAndUnmodifiedRanksCompileEachKeyOnce) {
  address_ = daemon_->address();
  const std::map<std::string, std::vector<std::string>> compiles = RunFleet();
  ExpectOneCompilePerKey(compiles);
  // What adapter ranks compiled they published through neffd too.
  for (const auto& [key, by] : compiles) {
    if (by != std::vector<std::string>{"adapter"}) continue;
    CommandResult lookup = RunNeffctl(
        *daemon_, {"lookup", "neff", key, "--compiler_version", "2.19.8089.0"});
    EXPECT_EQ(lookup.exit_code, 0) << key << ": " << lookup.err;
  }
}

TEST_P(TorchNeuronAdapterTest, WithoutTheDaemonStillOneCompilePerKey) {
  daemon_->Signal(SIGTERM);
  daemon_->Wait();
  address_ = daemon_->address();  // nobody listens: the filesystem serves
  ExpectOneCompilePerKey(RunFleet());
}

TEST_P(TorchNeuronAdapterTest, AnUnmodifiedRankWaitsForTheLeaseThenReads) {
  address_ = daemon_->address();
  const std::string key = Keys()[0];
  const std::string release = root_ + "/release";
  std::unique_ptr<Process> adapter = AdapterRank({key}, release);
  ASSERT_TRUE(Said(*adapter, "LOCKED " + key)) << adapter->Stderr();
  // The adapter rank holds neffd's lease on the key.
  ASSERT_EQ(GetLocks(*daemon_).leases_size(), 1);

  std::unique_ptr<Process> rank = Rank(key);
  ASSERT_TRUE(Said(*rank, "WAITING")) << rank->Stderr();
  EXPECT_FALSE(absl::StrContains(rank->Stdout(), "LOCKED"));
  WriteFile(release, "");
  EXPECT_EQ(rank->Wait(), 0) << rank->Stderr();
  EXPECT_EQ(adapter->Wait(), 0) << adapter->Stderr();
  // It got the lock only once the entry was there, and read it.
  EXPECT_EQ(Events(*rank), "WAITING\nLOCKED\nHIT\nRELEASED\n");
  EXPECT_EQ(adapter->Stdout(), absl::StrCat("LOCKED ", key, "\nCOMPILED ", key,
                                            "\nRELEASED ", key, "\n"));
}

TEST_P(TorchNeuronAdapterTest, TheModulesTorchNeuronCache) {
  address_ = daemon_->address();
  const std::string script = R"PY(
import neffclient, os, sys
key, other = sys.argv[1], sys.argv[2]
cache = neffclient.TorchNeuronCache("2.19.8089.0")
assert cache.get(key) is None and not cache.exists(key)
with cache.acquire_lock(key, timeout=5) as lock:
    assert lock.held and lock.key == key
    cache.put(key, b"neff")
assert not lock.held
assert cache.get(key) == b"neff" and cache.exists(key)
cache.put(other, "text neff")
assert cache.get(other) == b"text neff"
cache.remove(key)
cache.clear()
assert not os.path.exists(os.path.join(sys.argv[3], other[0:2]))
try:
    cache.get("not-a-key")
    raise SystemExit("no ValueError")
except ValueError:
    pass
# The lock a rank holds (LOCKED printed before this ran) times out.
try:
    cache.acquire_lock(sys.argv[4], timeout=1)
    raise SystemExit("no LockTimeoutError")
except neffclient.LockTimeoutError as e:
    assert issubclass(neffclient.LockTimeoutError, neffclient.Error)
    assert "lock timeout" in str(e), str(e)
print("OK")
)PY";
  const std::vector<std::string> keys = Keys();
  const std::string release = root_ + "/release";
  std::unique_ptr<Process> holder = AdapterRank({keys[3]}, release);
  ASSERT_TRUE(Said(*holder, "LOCKED " + keys[3])) << holder->Stderr();
  CommandResult run = RunCommand({"/usr/bin/python3", "-c", script, keys[0],
                                  keys[1], daemon_->neff_dir(), keys[3]},
                                 Env());
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.out, "OK\n") << run.err;
  WriteFile(release, "");
  EXPECT_EQ(holder->Wait(), 0) << holder->Stderr();
}

}  // namespace
}  // namespace neffd::test_support
