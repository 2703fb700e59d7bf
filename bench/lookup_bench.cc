// lookup_bench: Lookup hit latency and throughput of a real neffd over its
// unix socket, against the floor any gRPC daemon pays on the same socket: a
// bare unary echo (bench/echo_server, same server settings and service API).
//
// Starts `neffd` and `echo_server` on fresh directories and sockets,
// publishes --entries small entries, then for each client count in --clients
// runs that many threads, each with its own channel and stub (one connection
// per rank, as in production), issuing Lookups of random cached keys, then
// echoes of the same request and response sizes, for --seconds each. Lookup
// and echo runs alternate, --runs times, so both see the same machine load.
// Prints a markdown table of medians over runs (p50, p99, p999, calls/s and
// the Lookup/echo ratios of each pair of runs); --data writes the same
// figures for gnuplot.
//
//   bench/run_lookup.sh   (builds -c opt, runs, writes docs/bench/lookup.*)
#include <signal.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "bench/echo.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "tests/harness/process.h"

ABSL_FLAG(std::string, clients, "1,8,32,128", "comma-separated client counts");
ABSL_FLAG(int, entries, 1000, "entries published before measuring");
ABSL_FLAG(double, seconds, 3, "measured seconds per run");
ABSL_FLAG(int, runs, 5, "runs per client count (each Lookup and echo)");
ABSL_FLAG(std::string, only, "",
          "'lookup' or 'echo' to measure one (profiling)");
ABSL_FLAG(std::string, data, "", "also write the medians here, for gnuplot");
ABSL_FLAG(std::string, echo_flags, "",
          "extra echo_server flags, space-separated (experiments)");
ABSL_FLAG(std::string, workdir, "/tmp/neffd-lookup-bench", "scratch dir");

namespace neffd {
namespace {

using Clock = std::chrono::steady_clock;

struct RunResult {
  double p50_us, p99_us, p999_us, calls_per_s;
  // CPU time per call of the server process and of this (client) process:
  // unlike throughput, it does not depend on how much of the shared machine
  // the run got.
  double server_cpu_us, client_cpu_us;
};

// One client thread's call, made over its own stub; false if it failed.
using Call = std::function<bool()>;

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address) {
  // A distinct channel argument gives each client its own connection.
  static std::atomic<int> n{0};
  grpc::ChannelArguments args;
  args.SetInt("neffd.bench.client", n++);
  return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(),
                                   args);
}

std::string Key(int i) { return absl::StrCat("bench", i); }

v1::LookupRequest LookupOf(const std::string& key) {
  v1::LookupRequest request;
  request.mutable_id()->set_namespace_("neff");
  request.mutable_id()->set_compiler_version("bench");
  request.mutable_id()->set_key(key);
  return request;
}

// Publishes the entries from a few threads (each publish fsyncs), then looks
// each up once so that the host's local copies exist before measuring.
void Populate(const std::string& address, int entries) {
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto stub = v1::CompileCache::NewStub(NewChannel(address));
      for (int i = t; i < entries; i += kThreads) {
        v1::EntryId id = LookupOf(Key(i)).id();
        const std::string bytes =
            absl::StrCat("neff ", i, std::string(4096, 'x'));
        absl::Status s = test_support::PublishInline(*stub, id, bytes);
        grpc::ClientContext context;
        v1::LookupResponse response;
        grpc::Status found =
            stub->Lookup(&context, LookupOf(Key(i)), &response);
        if ((!s.ok() && !absl::IsAlreadyExists(s)) || !found.ok() ||
            response.result() != v1::LookupResponse::HIT) {
          std::fprintf(stderr, "populating %s failed: %s / %s\n",
                       Key(i).c_str(), s.ToString().c_str(),
                       found.error_message().c_str());
          std::exit(1);
        }
      }
    });
  }
  for (auto& t : threads) t.join();
}

// Runs `clients` threads, each calling `make_call(thread)`'s call in a loop
// for `duration` from a common start (connections are made before it).
RunResult Measure(int clients, absl::Duration duration, pid_t server,
                  const std::function<Call(int)>& make_call) {
  std::vector<std::vector<double>> latencies(clients);
  std::vector<std::thread> threads;
  std::atomic<bool> failed{false};
  std::atomic<int> ready{0};
  absl::Notification go;
  Clock::time_point end;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      Call call = make_call(c);
      if (!call()) failed = true;  // connect before the clock starts
      ++ready;
      go.WaitForNotification();
      std::vector<double>& mine = latencies[c];
      mine.reserve(1 << 16);
      for (Clock::time_point t0 = Clock::now(); t0 < end;) {
        const bool ok = call();
        const Clock::time_point t1 = Clock::now();
        mine.push_back(
            std::chrono::duration<double, std::micro>(t1 - t0).count());
        if (!ok) failed = true;
        t0 = t1;
      }
    });
  }
  while (ready.load() < clients) absl::SleepFor(absl::Milliseconds(1));
  const double server_cpu0 = bench::CpuSeconds(server);
  const double client_cpu0 = bench::SelfCpuSeconds();
  end = Clock::now() + absl::ToChronoNanoseconds(duration);
  go.Notify();
  for (auto& t : threads) t.join();
  const double server_cpu = bench::CpuSeconds(server) - server_cpu0;
  const double client_cpu = bench::SelfCpuSeconds() - client_cpu0;
  if (failed) {
    std::fprintf(stderr, "a call failed or a lookup was not a hit\n");
    std::exit(1);
  }
  std::vector<double> all;
  for (auto& l : latencies) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double q) {
    return all[static_cast<size_t>(q * (all.size() - 1))];
  };
  return RunResult{pct(0.50),
                   pct(0.99),
                   pct(0.999),
                   all.size() / absl::ToDoubleSeconds(duration),
                   server_cpu * 1e6 / all.size(),
                   client_cpu * 1e6 / all.size()};
}

// Medians over runs of one kind of call.
struct Series {
  std::vector<double> p50, p99, p999, rate, server_cpu, client_cpu;
  void Add(const RunResult& r) {
    server_cpu.push_back(r.server_cpu_us);
    client_cpu.push_back(r.client_cpu_us);
    p50.push_back(r.p50_us);
    p99.push_back(r.p99_us);
    p999.push_back(r.p999_us);
    rate.push_back(r.calls_per_s);
  }
};

// Waits until something serves `address` (the echo server just started).
bool WaitForServer(const std::string& address, test_support::Process& process) {
  auto channel = NewChannel(address);
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline && process.Running()) {
    if (channel->WaitForConnected(std::chrono::system_clock::now() +
                                  std::chrono::milliseconds(100))) {
      return true;
    }
  }
  return false;
}

int Main(int argc, char** argv) {
  // The daemon and the echo server do the same (Debian's absl is a debug
  // build): the client's gRPC locks should not pay the deadlock detector.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::ParseCommandLine(argc, argv);
  const std::string root = absl::GetFlag(FLAGS_workdir);
  bench::PrepareHarness(root);
  test_support::DaemonProcess daemon(root);
  if (!daemon.Start()) {
    std::fprintf(stderr, "neffd did not start: %s\n",
                 daemon.process().Stderr().c_str());
    return 1;
  }
  const std::string echo_address =
      absl::StrCat("unix:", daemon.socket_path(), ".echo");
  std::vector<std::string> echo_argv = {
      test_support::Runfile("bench/echo_server"), "--address=" + echo_address};
  for (absl::string_view f : absl::StrSplit(absl::GetFlag(FLAGS_echo_flags),
                                            ' ', absl::SkipEmpty())) {
    echo_argv.emplace_back(f);
  }
  test_support::Process echo(echo_argv);
  if (!WaitForServer(echo_address, echo)) {
    std::fprintf(stderr, "echo_server did not start: %s\n",
                 echo.Stderr().c_str());
    return 1;
  }
  std::fprintf(stderr, "neffd pid %d, echo_server pid %d\n",
               daemon.process().pid(), echo.pid());
  const int entries = absl::GetFlag(FLAGS_entries);
  Populate(daemon.address(), entries);
  std::fprintf(stderr, "populated %d entries; measuring\n", entries);
  std::vector<std::string> keys;
  for (int i = 0; i < entries; ++i) keys.push_back(Key(i));

  // The echo moves as many bytes as a Lookup hit does.
  v1::LookupResponse sample;
  {
    auto stub = v1::CompileCache::NewStub(NewChannel(daemon.address()));
    grpc::ClientContext context;
    stub->Lookup(&context, LookupOf(Key(0)), &sample);
  }
  bench::EchoRequest echo_request;
  echo_request.set_payload(std::string(LookupOf(Key(0)).ByteSizeLong(), 'q'));
  echo_request.set_reply_bytes(sample.ByteSizeLong());

  auto lookup_call = [&](int c) -> Call {
    auto stub = std::shared_ptr<v1::CompileCache::Stub>(
        v1::CompileCache::NewStub(NewChannel(daemon.address())));
    auto rng = std::make_shared<std::mt19937>(c);
    auto request = std::make_shared<v1::LookupRequest>(LookupOf(Key(0)));
    auto response = std::make_shared<v1::LookupResponse>();
    return [&keys, stub, rng, request, response] {
      request->mutable_id()->set_key(
          keys[std::uniform_int_distribution<int>(0, keys.size() - 1)(*rng)]);
      grpc::ClientContext context;
      grpc::Status s = stub->Lookup(&context, *request, response.get());
      if (s.ok() && response->result() == v1::LookupResponse::HIT) return true;
      std::fprintf(stderr, "Lookup %s: %s, result %d\n",
                   request->id().key().c_str(), s.error_message().c_str(),
                   static_cast<int>(response->result()));
      return false;
    };
  };
  auto echo_call = [&](int) -> Call {
    auto stub = std::shared_ptr<bench::Echo::Stub>(
        bench::Echo::NewStub(NewChannel(echo_address)));
    auto response = std::make_shared<bench::EchoResponse>();
    return [&echo_request, stub, response] {
      grpc::ClientContext context;
      grpc::Status s = stub->Echo(&context, echo_request, response.get());
      if (!s.ok())
        std::fprintf(stderr, "Echo: %s\n", s.error_message().c_str());
      return s.ok();
    };
  };

  const std::string only = absl::GetFlag(FLAGS_only);
  const absl::Duration duration = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::FILE* data = nullptr;
  if (!absl::GetFlag(FLAGS_data).empty()) {
    data = std::fopen(absl::GetFlag(FLAGS_data).c_str(), "w");
    std::fprintf(data,
                 "# clients lookup_p50 lookup_p99 lookup_p999 lookup_rate "
                 "echo_p50 echo_p99 echo_p999 echo_rate lookup_server_cpu "
                 "echo_server_cpu (us, calls/s, us per call)\n");
  }
  std::string latency_table =
      "| clients | Lookup p50 (us) | p99 | p999 | Lookups/s | echo p50 (us) "
      "| p99 | p999 | echoes/s | p50 Lookup/echo | throughput Lookup/echo |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  std::string cpu_table =
      "| clients | neffd CPU/Lookup (us) | echo_server CPU/echo (us) | "
      "server Lookup/echo | client CPU/Lookup (us) | client CPU/echo (us) | "
      "2-core bound Lookups/s | 2-core bound echoes/s |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (absl::string_view c :
       absl::StrSplit(absl::GetFlag(FLAGS_clients), ',')) {
    int clients = 0;
    if (!absl::SimpleAtoi(c, &clients) || clients <= 0) return 2;
    Series lookups, echoes;
    std::vector<double> p50_ratio, rate_ratio, cpu_ratio;
    for (int r = 0; r < absl::GetFlag(FLAGS_runs); ++r) {
      if (only != "echo") {
        lookups.Add(
            Measure(clients, duration, daemon.process().pid(), lookup_call));
      }
      if (only != "lookup") {
        echoes.Add(Measure(clients, duration, echo.pid(), echo_call));
      }
      if (only.empty()) {
        p50_ratio.push_back(lookups.p50.back() / echoes.p50.back());
        rate_ratio.push_back(lookups.rate.back() / echoes.rate.back());
        cpu_ratio.push_back(lookups.server_cpu.back() /
                            echoes.server_cpu.back());
      }
    }
    const std::string row = absl::StrFormat(
        "| %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.2f "
        "| %.2f |\n",
        clients, bench::Median(lookups.p50), bench::Median(lookups.p99),
        bench::Median(lookups.p999), bench::Median(lookups.rate),
        bench::Median(echoes.p50), bench::Median(echoes.p99),
        bench::Median(echoes.p999), bench::Median(echoes.rate),
        bench::Median(p50_ratio), bench::Median(rate_ratio));
    std::fprintf(stderr, "%s", row.c_str());
    latency_table += row;
    // What two otherwise idle cores could do if they only ran this client
    // and this server.
    auto bound = [](const Series& s) {
      const double cpu =
          bench::Median(s.server_cpu) + bench::Median(s.client_cpu);
      return cpu > 0 ? 2e6 / cpu : 0;
    };
    absl::StrAppendFormat(
        &cpu_table, "| %d | %.1f | %.1f | %.2f | %.1f | %.1f | %.0f | %.0f |\n",
        clients, bench::Median(lookups.server_cpu),
        bench::Median(echoes.server_cpu), bench::Median(cpu_ratio),
        bench::Median(lookups.client_cpu), bench::Median(echoes.client_cpu),
        bound(lookups), bound(echoes));
    if (data != nullptr) {
      std::fprintf(
          data, "%d %.1f %.1f %.1f %.0f %.1f %.1f %.1f %.0f %.1f %.1f\n",
          clients, bench::Median(lookups.p50), bench::Median(lookups.p99),
          bench::Median(lookups.p999), bench::Median(lookups.rate),
          bench::Median(echoes.p50), bench::Median(echoes.p99),
          bench::Median(echoes.p999), bench::Median(echoes.rate),
          bench::Median(lookups.server_cpu), bench::Median(echoes.server_cpu));
    }
  }
  std::printf("%s\n%s", latency_table.c_str(), cpu_table.c_str());
  if (data != nullptr) std::fclose(data);
  echo.Signal(SIGTERM);
  echo.Wait();
  unlink(echo_address.substr(5).c_str());
  daemon.Signal(SIGTERM);
  daemon.Wait();
  return 0;
}

}  // namespace
}  // namespace neffd

int main(int argc, char** argv) { return neffd::Main(argc, argv); }
