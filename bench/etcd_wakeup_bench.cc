// Issue 32's figures, in one run, for three neffd hosts on one store:
//   - wake-up: host A holds a key, hosts B and C wait for it (Lock, wait);
//     A publishes after a hold of 0.5-1.5 s (so the publish falls at any
//     phase of a poll); how long after A's Publish returned each waiter is
//     answered, and how many store operations each waiting host made per
//     second while it waited. Once with the filesystem protocol (lease
//     files, --poll_interval), once with --coordinator=etcd://.
//   - hand-over: host A's daemon holding a key is SIGKILLed; how long until
//     B's waiter is granted it. With etcd at its default timing (a 2 s
//     minimum lease TTL) and tuned (--election-timeout=500, a 1 s TTL). The
//     filesystem protocol's is --lease_ttl plus a poll by construction.
// Prints a markdown table (and writes it to --markdown).
#include <signal.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "grpcpp/client_context.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "tests/harness/etcd_server.h"
#include "tests/harness/process.h"

ABSL_FLAG(int, keys, 20, "keys published per protocol (wake-up samples / 2)");
ABSL_FLAG(int, handovers, 5, "SIGKILL hand-overs per etcd timing");
ABSL_FLAG(double, poll_interval, 1.0,
          "the filesystem protocol's --poll_interval, seconds (its default)");
ABSL_FLAG(std::string, workdir, "/tmp/neffd-etcd-bench", "scratch dir");
ABSL_FLAG(std::string, markdown, "", "also write the table here");

namespace neffd::bench {
namespace {

using test_support::DaemonProcess;
using test_support::EtcdServer;

constexpr char kVersion[] = "2.19.1";

class Hosts {
 public:
  Hosts(const std::string& root, std::vector<std::string> flags) {
    for (const char* name : {"hostA", "hostB", "hostC"}) {
      std::vector<std::string> f = {"--cache_dir=" + root + "/shared/neff",
                                    "--hlo_cache_dir=" + root + "/shared/hlo",
                                    absl::StrCat("--host_id=", name)};
      f.insert(f.end(), flags.begin(), flags.end());
      daemons_.push_back(
          std::make_unique<DaemonProcess>(absl::StrCat(root, "/", name), f));
      if (!daemons_.back()->Start()) {
        std::fprintf(stderr, "neffd %s did not start: %s\n", name,
                     daemons_.back()->process().Stderr().c_str());
        std::exit(1);
      }
    }
  }
  DaemonProcess& operator[](size_t i) { return *daemons_[i]; }

 private:
  std::vector<std::unique_ptr<DaemonProcess>> daemons_;
};

v1::EntryId Id(const std::string& key) {
  v1::EntryId id;
  id.set_namespace_("neff");
  id.set_compiler_version(kVersion);
  id.set_key(key);
  return id;
}

v1::LockResponse Lock(const DaemonProcess& daemon, const std::string& key,
                      const std::string& host, bool wait) {
  v1::LockRequest request;
  *request.mutable_id() = Id(key);
  request.mutable_holder()->set_host(host);
  request.mutable_holder()->set_pid(getpid());
  request.set_wait(wait);
  request.set_wait_seconds(120);
  v1::LockResponse response;
  grpc::ClientContext context;
  grpc::Status status = daemon.NewStub()->Lock(&context, request, &response);
  if (!status.ok()) response.set_outcome(v1::LockResponse::OUTCOME_UNSPECIFIED);
  return response;
}

bool Publish(const DaemonProcess& daemon, const std::string& key,
             const std::string& lease_id) {
  return test_support::PublishHeld(*daemon.NewStub(), lease_id, Id(key),
                                   std::string(128 << 10, 'n') + key)
      .ok();
}

struct WakeFigures {
  std::vector<double> wake_ms;         // per waiter
  std::vector<double> ops_per_second;  // per waiting host, while waiting
};

void Die(const std::string& why) {
  std::fprintf(stderr, "etcd_wakeup_bench: %s\n", why.c_str());
  std::exit(1);
}

// Host A holds each key; B and C wait; A publishes.
WakeFigures WakeUps(Hosts& hosts, const std::string& prefix, int keys) {
  WakeFigures figures;
  std::mt19937 jitter(42);
  std::uniform_real_distribution<double> hold(0.5, 1.5);
  for (int k = 0; k < keys; ++k) {
    const std::string key = absl::StrFormat("%s%04d", prefix, k);
    v1::LockResponse held = Lock(hosts[0], key, "hostA", false);
    if (held.outcome() != v1::LockResponse::GRANTED) Die("A not granted");
    absl::Time answered[2];
    std::vector<std::thread> waiters;
    for (int w = 0; w < 2; ++w) {
      waiters.emplace_back([&, w] {
        v1::LockResponse r = Lock(hosts[1 + w], key, "waiter", true);
        answered[w] = absl::Now();
        if (r.outcome() != v1::LockResponse::READY) Die("waiter not READY");
      });
    }
    if (!test_support::PollUntil(
            [&] {
              return test_support::LockWaiters(hosts[1]) == 1 &&
                     test_support::LockWaiters(hosts[2]) == 1;
            },
            absl::Seconds(60))) {
      Die("waiters not parked");
    }
    uint64_t before[2], after[2];
    for (int w = 0; w < 2; ++w) {
      before[w] = test_support::StatsOf(hosts[1 + w]).store_metadata_ops();
    }
    const double held_for = hold(jitter);
    absl::SleepFor(absl::Seconds(held_for));
    for (int w = 0; w < 2; ++w) {
      after[w] = test_support::StatsOf(hosts[1 + w]).store_metadata_ops();
    }
    if (!Publish(hosts[0], key, held.lease().lease_id())) Die("publish failed");
    const absl::Time published = absl::Now();
    for (std::thread& t : waiters) t.join();
    for (int w = 0; w < 2; ++w) {
      figures.wake_ms.push_back(
          absl::ToDoubleMilliseconds(answered[w] - published));
      // Two StatsOf calls bracket the window; GetStats itself makes none.
      figures.ops_per_second.push_back((after[w] - before[w]) / held_for);
      if (after[w] != before[w]) {
        std::fprintf(stderr, "%s: host %d made %llu store ops while waiting\n",
                     key.c_str(), 1 + w,
                     static_cast<unsigned long long>(after[w] - before[w]));
      }
    }
  }
  return figures;
}

// Host A's daemon holds a key and is SIGKILLed; B's waiter is granted.
std::vector<double> HandOvers(Hosts& hosts, const std::string& prefix,
                              int rounds) {
  std::vector<double> seconds;
  for (int k = 0; k < rounds; ++k) {
    const std::string key = absl::StrFormat("%s%04d", prefix, k);
    if (Lock(hosts[0], key, "hostA", false).outcome() !=
        v1::LockResponse::GRANTED) {
      Die("A not granted");
    }
    absl::Time granted;
    std::thread waiter([&] {
      if (Lock(hosts[1], key, "waiter", true).outcome() !=
          v1::LockResponse::GRANTED) {
        Die("B not granted after the kill");
      }
      granted = absl::Now();
    });
    if (!test_support::PollUntil(
            [&] { return test_support::LockWaiters(hosts[1]) == 1; },
            absl::Seconds(60))) {
      Die("B not parked");
    }
    // A uniform phase of A's keep-alive when it dies.
    absl::SleepFor(absl::Milliseconds(137 * k % 700));
    const absl::Time killed = absl::Now();
    hosts[0].Signal(SIGKILL);
    hosts[0].Wait();
    waiter.join();
    seconds.push_back(absl::ToDoubleSeconds(granted - killed));
    if (!hosts[0].Start()) Die("A did not restart");
  }
  return seconds;
}

std::string Row(const std::string& what, const std::vector<double>& v,
                const char* unit) {
  return absl::StrFormat("| %s | %zu | %.1f | %.1f | %.1f | %s |\n", what,
                         v.size(), Median(v), Percentile(v, 0.9),
                         Percentile(v, 1.0), unit);
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string workdir = absl::GetFlag(FLAGS_workdir);
  PrepareHarness(workdir);
  const int keys = absl::GetFlag(FLAGS_keys);
  const int rounds = absl::GetFlag(FLAGS_handovers);
  std::string table =
      absl::StrCat("Machine: ", MachineDescription(), "; ", NowUtc(), "; load ",
                   LoadAverage(), "\n\n",
                   "| figure | samples | median | p90 | max | unit |\n"
                   "|---|---|---|---|---|---|\n");

  {
    Hosts polling(
        workdir + "/polling",
        {absl::StrCat("--poll_interval=", absl::GetFlag(FLAGS_poll_interval))});
    WakeFigures f = WakeUps(polling, "poll", keys);
    absl::StrAppend(
        &table,
        Row("wake-up after a publish elsewhere, lease files", f.wake_ms, "ms"),
        Row("store ops per waiting host while waiting, lease files",
            f.ops_per_second, "ops/s"));
  }
  {
    absl::StatusOr<std::unique_ptr<EtcdServer>> etcd =
        EtcdServer::Start(workdir + "/etcd-default");
    if (!etcd.ok()) Die(std::string(etcd.status().message()));
    Hosts hosts(workdir + "/etcd",
                {"--coordinator=etcd://" + (*etcd)->endpoint()});
    WakeFigures f = WakeUps(hosts, "etcd", keys);
    absl::StrAppend(
        &table, Row("wake-up after a publish elsewhere, etcd", f.wake_ms, "ms"),
        Row("store ops per waiting host while waiting, etcd", f.ops_per_second,
            "ops/s"));
    absl::StrAppend(&table,
                    Row("hand-over after SIGKILL of the holder's daemon, "
                        "etcd defaults (TTL 2 s)",
                        HandOvers(hosts, "kill", rounds), "s"));
  }
  {
    absl::StatusOr<std::unique_ptr<EtcdServer>> etcd = EtcdServer::Start(
        workdir + "/etcd-tuned", 1,
        {"--heartbeat-interval=50", "--election-timeout=500"});
    if (!etcd.ok()) Die(std::string(etcd.status().message()));
    Hosts hosts(
        workdir + "/etcd-tuned-hosts",
        {"--coordinator=etcd://" + (*etcd)->endpoint(), "--etcd_lease_ttl=1s"});
    absl::StrAppend(&table,
                    Row("hand-over after SIGKILL, etcd --election-timeout=500, "
                        "--etcd_lease_ttl=1s",
                        HandOvers(hosts, "tuned", rounds), "s"));
  }
  std::fputs(table.c_str(), stdout);
  if (!absl::GetFlag(FLAGS_markdown).empty()) {
    WriteOrDie(absl::GetFlag(FLAGS_markdown), table);
  }
  return 0;
}

}  // namespace
}  // namespace neffd::bench

int main(int argc, char** argv) { return neffd::bench::Main(argc, argv); }
