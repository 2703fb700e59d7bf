// rank_sim: one simulated training rank. It asks the cache for --graphs
// graphs in its own random order, compiling with the fake compiler
// (examples/fake_compiler.h) when it is the one to compile, and checks every
// file it gets against the bytes the key must have. Settings (cache dirs,
// daemon address, RANK, lock timeout...) come from the environment like a
// real rank's.
//
//   rank_sim --graphs=16 --compile_ms=300 --neff_bytes=65536
//            --compile_log=/tmp/compiles.txt [--fail_graphs=3,7]
//
// Prints one line per graph:
//   OK <graph> <key> <source> <sha256 of the file read> <path>
//   FAILED <graph> <key> <retry_after_unix_ms> <first log line>
//   ERROR <graph> <key> <message>
//   TORN <graph> <key> <what was wrong>
// Exit code: 0 if every graph was OK (or FAILED as --fail_graphs asked),
// 1 on an ERROR or an unexpected failure, 2 if a file was torn.
#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "client/cache_client.h"
#include "examples/fake_compiler.h"
#include "store/digest.h"
#include "store/file_util.h"

ABSL_FLAG(int, graphs, 16, "number of distinct graphs to ask for");
ABSL_FLAG(int, compile_ms, 200, "fake compile time per graph");
ABSL_FLAG(int64_t, neff_bytes, 64 << 10, "size of each fake NEFF");
ABSL_FLAG(std::string, compiler_version, "2.19.1", "compiler version");
ABSL_FLAG(std::string, ns, "neff", "namespace: neff or hlo");
ABSL_FLAG(std::string, compile_log, "", "append one line per compile here");
ABSL_FLAG(std::vector<std::string>, fail_graphs, {},
          "graphs whose compile fails deterministically");
ABSL_FLAG(int64_t, seed, -1, "order seed (default: the rank)");
ABSL_FLAG(std::string, address, "", "daemon address (default: environment)");
ABSL_FLAG(std::string, last_graph_after, "",
          "if set, ask for the last graph only once this file exists");

namespace neffd::examples {
namespace {

const char* SourceName(CacheResult::Source source) {
  switch (source) {
    case CacheResult::Source::kHit:
      return "hit";
    case CacheResult::Source::kWaited:
      return "waited";
    case CacheResult::Source::kCompiled:
      return "compiled";
    case CacheResult::Source::kUncached:
      return "uncached";
  }
  return "?";
}

int Main() {
  std::unique_ptr<CacheClient> client =
      CacheClient::FromEnvironment(absl::GetFlag(FLAGS_address));
  const int64_t rank = client->options().rank;
  const std::string version = absl::GetFlag(FLAGS_compiler_version);
  const std::string ns = absl::GetFlag(FLAGS_ns);
  const size_t neff_bytes = absl::GetFlag(FLAGS_neff_bytes);

  // The same graphs on every rank; each rank's log file differs, which the
  // key must ignore.
  std::vector<std::string> keys;
  for (int g = 0; g < absl::GetFlag(FLAGS_graphs); ++g) {
    absl::StatusOr<std::string> key = client->DeriveKey(
        absl::StrCat("HloModule graph_", g, "\n"),
        absl::StrCat("--model-type=transformer -O1 --logfile=/tmp/rank", rank,
                     "/log-neuron-cc.txt"),
        version, "trn2");
    if (!key.ok()) {
      std::fprintf(stderr, "rank_sim: %s\n", key.status().ToString().c_str());
      return 1;
    }
    keys.push_back(*key);
  }
  FakeCompilerOptions compiler;
  compiler.compile_time = absl::Milliseconds(absl::GetFlag(FLAGS_compile_ms));
  compiler.neff_bytes = neff_bytes;
  compiler.compile_log = absl::GetFlag(FLAGS_compile_log);
  compiler.rank = rank;
  std::set<int> fail_graphs;
  for (const std::string& g : absl::GetFlag(FLAGS_fail_graphs)) {
    int index = 0;
    if (absl::SimpleAtoi(g, &index) && index >= 0 &&
        index < static_cast<int>(keys.size())) {
      fail_graphs.insert(index);
      compiler.fail_keys.insert(keys[index]);
    }
  }

  std::vector<int> order(keys.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  const int64_t seed = absl::GetFlag(FLAGS_seed);
  std::mt19937 rng(seed >= 0 ? seed : rank);
  std::shuffle(order.begin(), order.end(), rng);

  int exit_code = 0;
  const std::string last_graph_after = absl::GetFlag(FLAGS_last_graph_after);
  for (int g : order) {
    const std::string& key = keys[g];
    if (!last_graph_after.empty() && g == order.back()) {
      struct stat st;
      while (stat(last_graph_after.c_str(), &st) != 0) {
        absl::SleepFor(absl::Milliseconds(10));
      }
    }
    absl::StatusOr<CacheResult> result = client->GetOrCompile(
        ns, version, key,
        [&](const CompileJob& job) { return FakeCompile(job, compiler); });
    if (!result.ok()) {
      std::optional<CompileFailure> failure =
          GetCompileFailure(result.status());
      if (failure.has_value() && fail_graphs.count(g) > 0) {
        std::string first = failure->log.substr(0, failure->log.find('\n'));
        std::printf("FAILED %d %s %lld %s\n", g, key.c_str(),
                    static_cast<long long>(
                        failure->retry_after == absl::InfinitePast()
                            ? 0
                            : absl::ToUnixMillis(failure->retry_after)),
                    first.c_str());
      } else {
        std::printf("ERROR %d %s %s\n", g, key.c_str(),
                    result.status().ToString().c_str());
        exit_code = std::max(exit_code, 1);
      }
      continue;
    }
    absl::StatusOr<std::string> content =
        ReadSmallFile(result->path, neff_bytes);
    const std::string got = content.ok() ? Sha256Hex(*content) : "unreadable";
    const std::string want = Sha256Hex(FakeNeffBytes(key, neff_bytes));
    if (got != want || result->sha256 != want) {
      std::printf("TORN %d %s file %s entry %s want %s\n", g, key.c_str(),
                  got.c_str(), result->sha256.c_str(), want.c_str());
      exit_code = 2;
      continue;
    }
    std::printf("OK %d %s %s %s %s\n", g, key.c_str(),
                SourceName(result->source), got.c_str(), result->path.c_str());
  }
  std::fflush(stdout);
  return exit_code;
}

}  // namespace
}  // namespace neffd::examples

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return neffd::examples::Main();
}
