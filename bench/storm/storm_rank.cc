// storm_rank: one rank of the SPMD storm benchmark (bench/storm/storm.cc).
// Once set up (and connected) it prints "ready". For each step it waits for
// "go" on stdin, gets graph g through --mode
// (daemon: the client library with neffd; fallback: the client library
// without a daemon; legacy: each rank on the shared directory by itself;
// floor: bench/storm/floor_protocol.h, which first says "locked" on rank 0),
// checks the bytes against the driver's reference copy (bench/storm/expected.h)
// and answers "got <g> <unix_us> <compile_end_us> <released_us>" on stdout:
// when it held the path, when its compile finished (0 if it did not
// compile) and, in legacy and floor mode, when it released the entry to the
// other ranks (0 otherwise).
// After the last step it prints "stats <metadata_ops> <bytes_read>" (the
// legacy protocol's own counts; bytes read by the rank itself otherwise).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/storm/expected.h"
#include "bench/storm/floor_protocol.h"
#include "bench/storm/legacy_protocol.h"
#include "client/cache_client.h"
#include "config/env.h"
#include "examples/fake_compiler.h"
#include "store/file_util.h"

ABSL_FLAG(std::string, mode, "daemon", "daemon, fallback, legacy or floor");
ABSL_FLAG(int, graphs, 16, "graphs per rank");
ABSL_FLAG(int, compile_ms, 200, "fake compile time");
ABSL_FLAG(int64_t, neff_bytes, 1 << 20, "NEFF size");
ABSL_FLAG(int, poll_ms, 1000, "legacy: poll interval for model.done");
ABSL_FLAG(int, seed, -1, "-1: every rank in the same order (SPMD)");
ABSL_FLAG(std::string, compile_log, "", "one line per compile");
ABSL_FLAG(std::string, expected_dir, "", "the driver's reference bytes");

namespace neffd::bench {
namespace {

int64_t NowUs() { return absl::ToUnixMicros(absl::Now()); }

int Main() {
  const std::string mode = absl::GetFlag(FLAGS_mode);
  const int graphs = absl::GetFlag(FLAGS_graphs);
  const size_t bytes = absl::GetFlag(FLAGS_neff_bytes);
  const config::EnvSnapshot env = config::EnvSnapshot::FromProcessEnvironment();
  const int64_t rank = env.GetInt("RANK");
  examples::FakeCompilerOptions compiler;
  compiler.compile_time = absl::Milliseconds(absl::GetFlag(FLAGS_compile_ms));
  compiler.neff_bytes = bytes;
  compiler.compile_log = absl::GetFlag(FLAGS_compile_log);
  compiler.rank = rank;

  std::unique_ptr<CacheClient> client;
  if (mode != "legacy") {
    CacheClientOptions options = CacheClientOptions::FromEnv(env);
    options.use_daemon = mode == "daemon";
    options.warn = [](const std::string&) {};
    client = std::make_unique<CacheClient>(options);
  }
  // A training rank has talked to the daemon long before a storm: connect
  // (one Lookup of a key no graph uses) before saying "ready", so neither
  // process start-up nor the first connection is inside the timed steps.
  if (client != nullptr) {
    absl::StatusOr<std::optional<CacheResult>> probe =
        client->Lookup("neff", "bench", "stormready");
    if (!probe.ok()) {
      std::printf("error -1 %s\n", probe.status().ToString().c_str());
      return 1;
    }
  }
  std::printf("ready\n");
  std::fflush(stdout);
  std::vector<int> order(graphs);
  for (int g = 0; g < graphs; ++g) order[g] = g;
  if (absl::GetFlag(FLAGS_seed) >= 0) {
    std::mt19937 rng(absl::GetFlag(FLAGS_seed) + rank);
    std::shuffle(order.begin(), order.end(), rng);
  }
  LegacyCounters counters;
  std::string line;
  std::string got;  // one buffer for every step (see ReadWhole)
  for (int g : order) {
    if (!std::getline(std::cin, line)) return 1;  // the driver went away
    const std::string key = GraphKey(g);
    int64_t compile_end_us = 0;
    int64_t got_us = 0;       // when the rank held the path (before reading)
    int64_t released_us = 0;  // legacy, floor: when this rank released it
    if (mode == "legacy" || mode == "floor") {
      auto compile = [&](const std::string& out) {
        CompileJob job;
        job.key = key;
        job.workdir = absl::StrCat(env.GetString("TORCH_NEURONX_DEBUG_DIR"),
                                   "/direct", rank);
        (void)MakeDirs(job.workdir);
        job.output_path = out;
        examples::FakeCompile(job, compiler);
        compile_end_us = NowUs();
        return absl::OkStatus();
      };
      const std::string entry_dir =
          absl::StrCat(env.GetString("TORCH_NEURONX_NEFF_CACHE_DIR"),
                       "/neuronxcc-bench/MODULE_", key);
      absl::StatusOr<DirectResult> r =
          mode == "legacy"
              ? LegacyGetOrCompile(
                    entry_dir, absl::Milliseconds(absl::GetFlag(FLAGS_poll_ms)),
                    compile, &counters)
              : FloorGetOrCompile(
                    entry_dir, /*compiles=*/rank == 0,
                    [] {
                      std::printf("locked\n");
                      std::fflush(stdout);
                    },
                    compile);
      got_us = NowUs();
      if (r.ok() && r->released != absl::InfinitePast()) {
        released_us = absl::ToUnixMicros(r->released);
      }
      absl::Status read =
          r.ok() ? LegacyRead(r->neff_path, &got, &counters) : r.status();
      if (!read.ok()) {
        std::printf("error %d %s\n", g, read.ToString().c_str());
        return 1;
      }
    } else {
      absl::StatusOr<CacheResult> r = client->GetOrCompile(
          "neff", "bench", key, [&](const CompileJob& job) {
            CompileResult result = examples::FakeCompile(job, compiler);
            compile_end_us = NowUs();
            return result;
          });
      if (!r.ok()) {
        std::printf("error %d %s\n", g, r.status().ToString().c_str());
        return 1;
      }
      got_us = NowUs();
      if (!ReadWhole(r->path, &got).ok()) got.clear();
      counters.bytes_read += got.size();
      if (r->source != CacheResult::Source::kCompiled) compile_end_us = 0;
    }
    if (got.size() != bytes ||
        !MatchesExpected(absl::GetFlag(FLAGS_expected_dir), key, got)) {
      std::printf("error %d wrong bytes (%zu of %zu)\n", g, got.size(), bytes);
      return 2;
    }
    std::printf("got %d %lld %lld %lld\n", g, static_cast<long long>(got_us),
                static_cast<long long>(compile_end_us),
                static_cast<long long>(released_us));
    std::fflush(stdout);
  }
  std::printf("stats %llu %llu\n",
              static_cast<unsigned long long>(counters.metadata_ops),
              static_cast<unsigned long long>(counters.bytes_read));
  std::fflush(stdout);
  return 0;
}

}  // namespace
}  // namespace neffd::bench

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  return neffd::bench::Main();
}
