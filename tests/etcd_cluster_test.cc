// Issue 32's acceptance with real processes: three neffd hosts on one store
// coordinating on a real etcd (Debian's etcd-server on loopback, one member
// or three), real rank processes (examples/rank_sim) and lock holders
// (tests/lock_holder). One compile per key; a waiting host is woken by the
// release it watches and makes no store operations while it waits; a
// SIGKILLed holder's key is handed on without the lease file's TTL; etcd
// killed mid-run costs no rank and no second compile, and the switch to the
// filesystem protocol and back is in `stats`.
#include <signal.h>

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/harness/etcd_server.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

// With the filesystem protocol alone, a dead holder's lease file would be
// judged stale only after this long: a hand-over well before it is etcd's.
constexpr char kLeaseTtl[] = "--lease_ttl=60";
// A host that polled would touch the store every 0.2 s.
constexpr char kPoll[] = "--poll_interval=0.2";

std::unique_ptr<EtcdServer> StartEtcd(
    const std::string& root, int members,
    const std::vector<std::string>& flags = {}) {
  absl::StatusOr<std::unique_ptr<EtcdServer>> etcd =
      EtcdServer::Start(root + "/etcd", members, flags);
  EXPECT_TRUE(etcd.ok()) << etcd.status();
  return etcd.ok() ? *std::move(etcd) : nullptr;
}

std::vector<std::string> Flags(const EtcdServer& etcd) {
  return {"--coordinator=etcd://" + etcd.endpoint(), kLeaseTtl, kPoll};
}

// Every OK line of every rank: key -> set of sha256s read.
void CollectReads(Process& rank,
                  std::map<std::string, std::set<std::string>>* reads) {
  for (absl::string_view line : absl::StrSplit(rank.Stdout(), '\n')) {
    std::vector<std::string> f = absl::StrSplit(line, ' ');
    if (f.size() >= 5 && f[0] == "OK") (*reads)[f[2]].insert(f[4]);
  }
}

// Starts `ranks` ranks on each host asking for `graphs` graphs, compiling
// each in `compile_ms`.
std::vector<std::unique_ptr<Process>> StartRanks(Cluster& cluster, int ranks,
                                                 int graphs, int compile_ms,
                                                 const std::string& log,
                                                 const std::string& version) {
  std::vector<std::unique_ptr<Process>> started;
  for (size_t h = 0; h < cluster.size(); ++h) {
    for (int r = 0; r < ranks; ++r) {
      started.push_back(cluster.StartRank(
          h, static_cast<int>(h) * ranks + r,
          {absl::StrCat("--graphs=", graphs),
           absl::StrCat("--compile_ms=", compile_ms), "--neff_bytes=4096",
           "--compiler_version=" + version, "--compile_log=" + log}));
    }
  }
  return started;
}

// Waits for every rank; each must succeed, and every key is read with one
// content everywhere.
void ExpectAllSucceedWithOneContentPerKey(
    std::vector<std::unique_ptr<Process>>& ranks, size_t keys) {
  std::map<std::string, std::set<std::string>> reads;
  for (auto& rank : ranks) {
    EXPECT_EQ(rank->Wait(), 0) << rank->Stdout() << rank->Stderr();
    CollectReads(*rank, &reads);
  }
  EXPECT_EQ(reads.size(), keys);
  for (const auto& [key, shas] : reads) {
    EXPECT_EQ(shas.size(), 1u) << "ranks read different bytes for " << key;
  }
}

std::unique_ptr<Process> Holder(const DaemonProcess& daemon,
                                const std::string& host) {
  return std::make_unique<Process>(std::vector<std::string>{
      Runfile("tests/lock_holder"), "--address=" + daemon.address(),
      "--key=beef01", "--host=" + host, "--hold_stream", "--heartbeat_ms=500",
      "--wait_seconds=120"});
}

bool Granted(Process& holder) {
  return absl::StrContains(holder.Stdout(), "GRANTED");
}

TEST(EtcdClusterTest, ThreeHostsCompileEachKeyOnceAndWaitersAreWokenByWatch) {
  const std::string root = TestTempDir();
  std::unique_ptr<EtcdServer> etcd = StartEtcd(root, 1);
  ASSERT_NE(etcd, nullptr);
  Cluster cluster(root, Flags(*etcd));
  for (const char* name : {"hostA", "hostB", "hostC"}) cluster.AddHost(name);
  const std::string log = root + "/compiles.txt";
  constexpr int kGraphs = 16;
  auto ranks = StartRanks(cluster, 8, kGraphs, 300, log, "2.19.1");
  ExpectAllSucceedWithOneContentPerKey(ranks, kGraphs);
  EXPECT_EQ(ReadLines(log).size(), static_cast<size_t>(kGraphs));
  uint64_t takes = 0, wakeups = 0;
  for (size_t h = 0; h < cluster.size(); ++h) {
    const v1::Stats stats = StatsOf(cluster.host(h));
    EXPECT_EQ(stats.coordinator(), "etcd");
    EXPECT_TRUE(stats.etcd_healthy()) << stats.etcd_last_error();
    EXPECT_EQ(stats.etcd_fallbacks(), 0u) << stats.etcd_last_error();
    // At least the 1 s asked: etcd may raise it to its minimum.
    EXPECT_GE(stats.etcd_lease_ttl_ms(), 1000);
    takes += stats.etcd_takes();
    wakeups += stats.etcd_watch_wakeups();
  }
  EXPECT_GE(takes, static_cast<uint64_t>(kGraphs));
  EXPECT_GT(wakeups, 0u);  // hosts waited on each other and were woken
}

TEST(EtcdClusterTest, AWaitingHostMakesNoStoreOperationsUntilItIsWoken) {
  const std::string root = TestTempDir();
  std::unique_ptr<EtcdServer> etcd = StartEtcd(root, 1);
  ASSERT_NE(etcd, nullptr);
  Cluster cluster(root, Flags(*etcd));
  DaemonProcess& a = cluster.AddHost("hostA");
  DaemonProcess& b = cluster.AddHost("hostB");
  auto holder = Holder(a, "hostA");
  ASSERT_TRUE(WaitUntil([&] { return Granted(*holder); }, absl::Seconds(60)))
      << holder->Stdout() << holder->Stderr();
  auto waiter = Holder(b, "hostB");
  ASSERT_TRUE(
      WaitUntil([&] { return LockWaiters(b) == 1; }, absl::Seconds(60)));
  // What is asserted is an absence, so it is watched over a window: ten
  // poll intervals in which a polling host would have looked ten times.
  const uint64_t before = StatsOf(b).store_metadata_ops();
  absl::SleepFor(absl::Seconds(2));
  EXPECT_EQ(StatsOf(b).store_metadata_ops(), before);
  EXPECT_FALSE(Granted(*waiter));
  const v1::LocksResponse locks = GetLocks(b);  // neffctl locks' source
  ASSERT_EQ(locks.cluster_holders_size(), 1) << locks.cluster_holders_error();
  EXPECT_EQ(locks.cluster_holders(0).host(), "hostA");
  EXPECT_EQ(locks.cluster_holders(0).key(), "neff/1.0/beef01");

  holder->Signal(SIGKILL);  // hostA's lease ends with its holder
  holder->Wait();
  EXPECT_TRUE(WaitUntil([&] { return Granted(*waiter); }, absl::Seconds(60)))
      << waiter->Stdout() << waiter->Stderr();
  EXPECT_EQ(StatsOf(b).etcd_watch_wakeups(), 1u);
}

// etcd timed as docs/OPERATIONS.md says, so that it grants the 1 s TTL neffd
// asks (at its default timing its minimum is 2 s).
TEST(EtcdClusterTest, SigkillOfTheHoldingDaemonHandsTheKeyOnBeforeTheFileTtl) {
  const std::string root = TestTempDir();
  std::unique_ptr<EtcdServer> etcd =
      StartEtcd(root, 1, {"--heartbeat-interval=50", "--election-timeout=500"});
  ASSERT_NE(etcd, nullptr);
  Cluster cluster(root, Flags(*etcd));
  DaemonProcess& a = cluster.AddHost("hostA");
  DaemonProcess& b = cluster.AddHost("hostB");
  auto holder = Holder(a, "hostA");
  ASSERT_TRUE(WaitUntil([&] { return Granted(*holder); }, absl::Seconds(60)));
  auto waiter = Holder(b, "hostB");
  ASSERT_TRUE(
      WaitUntil([&] { return LockWaiters(b) == 1; }, absl::Seconds(60)));
  EXPECT_EQ(StatsOf(a).etcd_lease_ttl_ms(), 1000);
  const absl::Time killed = absl::Now();
  a.Signal(SIGKILL);
  a.Wait();
  // Well inside the 60 s a lease file would need to go stale.
  ASSERT_TRUE(WaitUntil([&] { return Granted(*waiter); }, absl::Seconds(30)))
      << waiter->Stdout() << waiter->Stderr();
  std::printf("hand-over after SIGKILL: %s\n",
              absl::FormatDuration(absl::Now() - killed).c_str());
  holder->Signal(SIGKILL);
}

// Three hosts coordinating on an etcd of some members, with 6 ranks each
// compiling kGraphs graphs, caught in the middle of their run.
struct MidRun {
  static constexpr int kGraphs = 24;
  std::string root = TestTempDir();
  std::string log = root + "/compiles.txt";
  std::unique_ptr<EtcdServer> etcd;
  std::unique_ptr<Cluster> cluster;
  std::vector<std::unique_ptr<Process>> ranks;
};

// Returns once the ranks have compiled three graphs; nullptr if etcd did not
// start or no compile came.
std::unique_ptr<MidRun> StartMidRun(int etcd_members) {
  auto run = std::make_unique<MidRun>();
  run->etcd = StartEtcd(run->root, etcd_members);
  if (run->etcd == nullptr) return nullptr;
  run->cluster = std::make_unique<Cluster>(run->root, Flags(*run->etcd));
  for (const char* name : {"hostA", "hostB", "hostC"}) {
    run->cluster->AddHost(name);
  }
  run->ranks =
      StartRanks(*run->cluster, 6, MidRun::kGraphs, 400, run->log, "2.19.1");
  const bool compiling = WaitUntil(
      [&] { return ReadLines(run->log).size() >= 3; }, absl::Seconds(120));
  EXPECT_TRUE(compiling);
  return compiling ? std::move(run) : nullptr;
}

// Kills etcd (all of it) while ranks compile, then brings it back.
TEST(EtcdClusterTest, EtcdKilledMidRunFailsNoRankAndCompilesNoKeyTwice) {
  std::unique_ptr<MidRun> run = StartMidRun(1);
  ASSERT_NE(run, nullptr);
  constexpr int kGraphs = MidRun::kGraphs;
  Cluster& cluster = *run->cluster;
  const std::string& log = run->log;
  run->etcd->Kill();
  ExpectAllSucceedWithOneContentPerKey(run->ranks, kGraphs);
  EXPECT_EQ(ReadLines(log).size(), static_cast<size_t>(kGraphs));
  uint64_t fallbacks = 0;
  for (size_t h = 0; h < cluster.size(); ++h) {
    fallbacks += StatsOf(cluster.host(h)).etcd_fallbacks();
  }
  EXPECT_GE(fallbacks, 1u);  // the switch is visible in stats

  // etcd back: every host returns to it, and a new run is coordinated
  // through it, once per key.
  ASSERT_TRUE(run->etcd->Restart().ok());
  auto second = StartRanks(cluster, 6, kGraphs, 100, log, "2.19.2");
  ExpectAllSucceedWithOneContentPerKey(second, kGraphs);
  EXPECT_EQ(ReadLines(log).size(), static_cast<size_t>(2 * kGraphs));
  for (size_t h = 0; h < cluster.size(); ++h) {
    v1::Stats stats;
    EXPECT_TRUE(WaitUntil(
        [&] {
          stats = StatsOf(cluster.host(h));
          return stats.etcd_healthy();
        },
        absl::Seconds(60)))
        << stats.etcd_last_error();
  }
}

TEST(EtcdClusterTest, OneOfThreeEtcdMembersKilledMidRunChangesNothing) {
  std::unique_ptr<MidRun> run = StartMidRun(3);
  ASSERT_NE(run, nullptr);
  run->etcd->KillMember(0);
  ExpectAllSucceedWithOneContentPerKey(run->ranks, MidRun::kGraphs);
  EXPECT_EQ(ReadLines(run->log).size(), static_cast<size_t>(MidRun::kGraphs));
  for (size_t h = 0; h < run->cluster->size(); ++h) {
    const v1::Stats stats = StatsOf(run->cluster->host(h));
    EXPECT_TRUE(stats.etcd_healthy()) << stats.etcd_last_error();
    EXPECT_GT(stats.etcd_takes() + stats.etcd_watch_wakeups(), 0u);
  }
}

}  // namespace
}  // namespace neffd::test_support
