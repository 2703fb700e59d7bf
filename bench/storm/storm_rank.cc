// storm_rank: one rank of the SPMD storm benchmark (bench/storm/storm.cc).
// For each step it waits for "go" on stdin, gets graph g through --mode
// (daemon: the client library with neffd; fallback: the client library
// without a daemon; legacy: each rank on the shared directory by itself),
// checks the bytes, and answers "got <g> <unix_us> <compiled> " on stdout.
// After the last step it prints "stats <metadata_ops> <bytes_read>" (the
// legacy protocol's own counts; bytes read by the rank itself otherwise).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/storm/legacy_protocol.h"
#include "client/cache_client.h"
#include "config/env.h"
#include "daemon/store/digest.h"
#include "daemon/store/file_util.h"
#include "examples/fake_compiler.h"

ABSL_FLAG(std::string, mode, "daemon", "daemon, fallback or legacy");
ABSL_FLAG(int, graphs, 16, "graphs per rank");
ABSL_FLAG(int, compile_ms, 200, "fake compile time");
ABSL_FLAG(int64_t, neff_bytes, 1 << 20, "NEFF size");
ABSL_FLAG(int, poll_ms, 1000, "legacy: poll interval for model.done");
ABSL_FLAG(int, seed, -1, "-1: every rank in the same order (SPMD)");
ABSL_FLAG(std::string, compile_log, "", "one line per compile");

namespace neffd::bench {
namespace {

int64_t NowUs() { return absl::ToUnixMicros(absl::Now()); }

// sha256 of FakeNeffBytes(key, bytes), cached in {TMPDIR or /tmp}/storm-sha.
std::string ExpectedSha(const std::string& key, size_t bytes) {
  const std::string dir = "/tmp/neffd-storm-expected";
  const std::string path = absl::StrCat(dir, "/", key, ".", bytes);
  absl::StatusOr<std::string> cached = ReadSmallFile(path, 128);
  if (cached.ok() && cached->size() == 64) return *cached;
  const std::string sha = Sha256Hex(examples::FakeNeffBytes(key, bytes));
  if (MakeDirs(dir).ok()) {
    (void)WriteFileAtomically(dir, absl::StrCat(key, ".", bytes), sha,
                              absl::StrCat("r", getpid()));
  }
  return sha;
}

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
  std::vector<int> order(graphs);
  for (int g = 0; g < graphs; ++g) order[g] = g;
  if (absl::GetFlag(FLAGS_seed) >= 0) {
    std::mt19937 rng(absl::GetFlag(FLAGS_seed) + rank);
    std::shuffle(order.begin(), order.end(), rng);
  }
  LegacyCounters counters;
  std::string line;
  for (int g : order) {
    if (!std::getline(std::cin, line)) return 1;  // the driver went away
    const std::string key = absl::StrCat("storm", g);
    // The expected digest is computed once per graph per run by whichever
    // rank gets there first (generating 8 MiB of fake NEFF per rank per
    // graph would cost more than the whole protocol being measured).
    const std::string want = ExpectedSha(key, bytes);
    std::string got;
    bool compiled = false;
    int64_t got_us = 0;  // when the rank held the path (before reading)
    if (mode == "legacy") {
      absl::StatusOr<LegacyResult> r = LegacyGetOrCompile(
          absl::StrCat(env.GetString("TORCH_NEURONX_NEFF_CACHE_DIR"),
                       "/neuronxcc-bench/MODULE_", key),
          absl::Milliseconds(absl::GetFlag(FLAGS_poll_ms)),
          [&](const std::string& out) {
            CompileJob job;
            job.key = key;
            job.workdir = absl::StrCat(env.GetString("TORCH_NEURONX_DEBUG_DIR"),
                                       "/legacy", rank);
            (void)MakeDirs(job.workdir);
            job.output_path = out;
            examples::FakeCompile(job, compiler);
            return absl::OkStatus();
          },
          &counters);
      if (!r.ok()) {
        std::printf("error %d %s\n", g, r.status().ToString().c_str());
        return 1;
      }
      got_us = NowUs();
      got = std::move(r->content);
      compiled = r->compiled;
    } else {
      absl::StatusOr<CacheResult> r = client->GetOrCompile(
          "neff", "bench", key, [&](const CompileJob& job) {
            return examples::FakeCompile(job, compiler);
          });
      if (!r.ok()) {
        std::printf("error %d %s\n", g, r.status().ToString().c_str());
        return 1;
      }
      got_us = NowUs();
      absl::StatusOr<std::string> content = ReadSmallFile(r->path, bytes + 1);
      got = content.ok() ? *content : "";
      counters.bytes_read += got.size();
      compiled = r->source == CacheResult::Source::kCompiled;
    }
    if (got.size() != bytes || Sha256Hex(got) != want) {
      std::printf("error %d wrong bytes (%zu of %zu)\n", g, got.size(), bytes);
      return 2;
    }
    std::printf("got %d %lld %d\n", g, static_cast<long long>(got_us),
                compiled ? 1 : 0);
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
