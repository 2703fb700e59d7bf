// lookup_bench: Lookup hit latency and throughput of a real neffd over its
// unix socket.
//
// Starts `--neffd` on fresh directories, publishes --entries small entries,
// then for each client count in --clients runs that many threads, each with
// its own channel (one connection per rank, as in production), issuing
// Lookups of random cached keys for --seconds. Each configuration is run
// --runs times; the table shows the median over runs of p50, p99 and
// throughput.
//
//   bazel run -c opt //bench:lookup_bench -- --runs=5
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <random>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "daemon/store/digest.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "tests/harness/process.h"

ABSL_FLAG(std::string, clients, "1,32", "comma-separated client counts");
ABSL_FLAG(int, entries, 1000, "entries published before measuring");
ABSL_FLAG(double, seconds, 3, "measured seconds per run");
ABSL_FLAG(int, runs, 5, "runs per client count");
ABSL_FLAG(std::string, workdir, "/tmp/neffd-lookup-bench", "scratch dir");

namespace neffd {
namespace {

struct RunResult {
  double p50_us, p99_us, lookups_per_s;
};

std::string Key(int i) { return absl::StrCat("bench", i); }

std::unique_ptr<v1::CompileCache::Stub> NewStub(const std::string& address) {
  // A distinct channel argument gives each client its own connection.
  static std::atomic<int> n{0};
  grpc::ChannelArguments args;
  args.SetInt("neffd.bench.client", n++);
  return v1::CompileCache::NewStub(grpc::CreateCustomChannel(
      address, grpc::InsecureChannelCredentials(), args));
}

void Populate(const std::string& address, int entries) {
  auto stub = NewStub(address);
  for (int i = 0; i < entries; ++i) {
    v1::EntryId id;
    id.set_namespace_("neff");
    id.set_compiler_version("bench");
    id.set_key(Key(i));
    const std::string bytes = absl::StrCat("neff ", i, std::string(4096, 'x'));
    absl::Status s = testing::PublishInline(*stub, id, bytes);
    if (!s.ok() && !absl::IsAlreadyExists(s)) {
      std::fprintf(stderr, "publish failed: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  }
}

RunResult Measure(const std::string& address, int clients, int entries,
                  absl::Duration duration) {
  std::vector<std::vector<double>> latencies(clients);
  std::vector<std::thread> threads;
  std::atomic<bool> failed{false};
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      auto stub = NewStub(address);
      std::mt19937 rng(c);
      std::uniform_int_distribution<int> pick(0, entries - 1);
      v1::LookupRequest request;
      request.mutable_id()->set_namespace_("neff");
      request.mutable_id()->set_compiler_version("bench");
      v1::LookupResponse response;
      {  // connect before the clock starts
        grpc::ClientContext warm;
        request.mutable_id()->set_key(Key(0));
        stub->Lookup(&warm, request, &response);
      }
      const absl::Time end = absl::Now() + duration;
      std::vector<double>& mine = latencies[c];
      mine.reserve(1 << 16);
      while (absl::Now() < end) {
        request.mutable_id()->set_key(Key(pick(rng)));
        grpc::ClientContext context;
        const absl::Time t0 = absl::Now();
        grpc::Status s = stub->Lookup(&context, request, &response);
        mine.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
        if (!s.ok() || response.result() != v1::LookupResponse::HIT) {
          failed = true;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  if (failed) {
    std::fprintf(stderr, "a lookup was not a hit\n");
    std::exit(1);
  }
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double q) {
    return all[static_cast<size_t>(q * (all.size() - 1))];
  };
  return RunResult{pct(0.50), pct(0.99),
                   all.size() / absl::ToDoubleSeconds(duration)};
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string root = absl::GetFlag(FLAGS_workdir);
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  setenv("TEST_TMPDIR", root.c_str(), 1);
  // bazel run: the daemon binary is in this binary's runfiles.
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  setenv("TEST_SRCDIR", (self + ".runfiles").c_str(), 1);
  testing::DaemonProcess daemon(root);
  if (!daemon.Start()) {
    std::fprintf(stderr, "neffd did not start: %s\n",
                 daemon.process().Stderr().c_str());
    return 1;
  }
  const int entries = absl::GetFlag(FLAGS_entries);
  Populate(daemon.address(), entries);

  std::printf("| clients | p50 (us) | p99 (us) | lookups/s |\n");
  std::printf("|---:|---:|---:|---:|\n");
  for (absl::string_view c :
       absl::StrSplit(absl::GetFlag(FLAGS_clients), ',')) {
    int clients = 0;
    if (!absl::SimpleAtoi(c, &clients) || clients <= 0) return 2;
    std::vector<double> p50, p99, rate;
    for (int r = 0; r < absl::GetFlag(FLAGS_runs); ++r) {
      RunResult result = Measure(daemon.address(), clients, entries,
                                 absl::Seconds(absl::GetFlag(FLAGS_seconds)));
      p50.push_back(result.p50_us);
      p99.push_back(result.p99_us);
      rate.push_back(result.lookups_per_s);
    }
    std::printf("| %d | %.0f | %.0f | %.0f |\n", clients, Median(p50),
                Median(p99), Median(rate));
    std::fflush(stdout);
  }
  daemon.Signal(SIGTERM);
  daemon.Wait();
  return 0;
}

}  // namespace
}  // namespace neffd

int main(int argc, char** argv) { return neffd::Main(argc, argv); }
