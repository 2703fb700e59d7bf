// Issue 5's acceptance, with real processes: 128 rank simulators
// (examples/rank_sim, linking CacheClient) ask for 16 graphs each in their
// own random order, against a real neffd, without any daemon (fallback
// mode), and with the daemon SIGKILLed and restarted mid-run. Plus a rank
// killed mid-compile and a deterministic compile failure, each with and
// without the daemon. Ranks check the sha256 of every file they get.
#include <signal.h>

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"
#include "tests/harness/store_files.h"
#include "tests/rank_fleet.h"

namespace neffd::test_support {
namespace {

constexpr int kRanks = 128;
constexpr int kGraphs = 16;

// key -> number of compiles, from the fake compiler's log.
std::map<std::string, int> CompilesPerKey(const RankFleet& fleet) {
  std::map<std::string, int> per_key;
  for (const std::string& line : fleet.Compiles()) {
    ++per_key[std::string(line.substr(0, line.find(' ')))];
  }
  return per_key;
}

class ClientRanksTest : public ::testing::Test {
 protected:
  void SetUp() override { root_ = TestTempDir(); }

  void StartDaemon(std::vector<std::string> flags = {}) {
    daemon_ = std::make_unique<DaemonProcess>(root_, std::move(flags));
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
  }

  // The daemon's address, or a socket nobody listens on.
  std::string Address() const {
    return daemon_ ? daemon_->address()
                   : absl::StrCat("unix:/tmp/neffd-none-", getpid(), ".sock");
  }

  void AwaitCompiles(const RankFleet& fleet, size_t n) {
    const absl::Time deadline = absl::Now() + absl::Seconds(120);
    while (fleet.Compiles().size() < n && absl::Now() < deadline) {
      absl::SleepFor(absl::Milliseconds(10));
    }
    ASSERT_GE(fleet.Compiles().size(), n);
  }

  std::string root_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(ClientRanksTest, DaemonCompilesEachOfSixteenKeysOnceFor128Ranks) {
  StartDaemon();
  RankFleet fleet(root_, Address());
  fleet.Start(kRanks, RankSimCommand(fleet.compile_log(), kGraphs, 300));
  std::vector<RankReport> reports = fleet.WaitAll();
  ExpectRanksAgree(reports, kGraphs);
  std::map<std::string, int> compiles = CompilesPerKey(fleet);
  EXPECT_EQ(fleet.Compiles().size(), static_cast<size_t>(kGraphs));
  EXPECT_EQ(compiles.size(), static_cast<size_t>(kGraphs));
  for (const RankReport& r : reports) {
    EXPECT_FALSE(absl::StrContains(r.err, "fallback")) << r.err;
  }
  EXPECT_EQ(CountFiles(root_ + "/local/staging"), 0);
  EXPECT_EQ(CountFiles(root_ + "/debug"), 0);  // workdirs removed
  // Each rank's get-or-compile is one Lock call that is its Lookup too: the
  // operator's statistics still count every one as a lookup.
  v1::Stats stats = StatsOf(*daemon_);
  EXPECT_EQ(stats.lookups(), static_cast<uint64_t>(kRanks * kGraphs));
  EXPECT_EQ(stats.hits() + stats.misses(), stats.lookups());
  EXPECT_EQ(stats.lock_grants(), static_cast<uint64_t>(kGraphs));
  EXPECT_EQ(stats.compiles_saved(),
            static_cast<uint64_t>((kRanks - 1) * kGraphs));
}

// The daemon's side of that: a Lock with look_up set answers a recorded
// entry or failure at once and counts it as a Lookup, not as a Lock; on a
// miss it counts a Lookup MISS and locks as usual.
TEST_F(ClientRanksTest, LockWithLookUpIsCountedAsTheLookup) {
  StartDaemon();
  std::unique_ptr<v1::CompileCache::Stub> stub = daemon_->NewStub();
  auto id = [](const std::string& key) {
    v1::EntryId id;
    id.set_namespace_("neff");
    id.set_compiler_version("2.19.1");
    id.set_key(key);
    return id;
  };
  auto lock = [&](const std::string& key, bool look_up) {
    LockCall call;
    call.look_up = look_up;
    absl::StatusOr<v1::LockResponse> response = CallLock(*stub, id(key), call);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.value_or(v1::LockResponse());
  };
  v1::LockResponse granted = lock("aaa111", true);
  ASSERT_EQ(granted.outcome(), v1::LockResponse::GRANTED);
  EXPECT_FALSE(granted.at_once());
  ASSERT_TRUE(
      PublishHeld(*stub, granted.lease().lease_id(), id("aaa111"), "NEFF bytes")
          .ok());
  v1::Stats stats = StatsOf(*daemon_);
  EXPECT_EQ(stats.lookups(), 1u);
  EXPECT_EQ(stats.misses(), 1u);
  EXPECT_EQ(stats.lock_grants(), 1u);

  v1::LockResponse hit = lock("aaa111", true);
  EXPECT_EQ(hit.outcome(), v1::LockResponse::READY);
  EXPECT_TRUE(hit.at_once());
  EXPECT_EQ(hit.entry().size(), 10u);
  stats = StatsOf(*daemon_);
  EXPECT_EQ(stats.lookups(), 2u);
  EXPECT_EQ(stats.hits(), 1u);
  EXPECT_EQ(stats.compiles_saved(), 1u);  // once, as the lookup
  // Without look_up the same answer is a Lock's, not a lookup.
  EXPECT_TRUE(lock("aaa111", false).at_once());
  stats = StatsOf(*daemon_);
  EXPECT_EQ(stats.lookups(), 2u);
  EXPECT_EQ(stats.compiles_saved(), 2u);

  v1::LockResponse failing = lock("bbb222", true);
  ASSERT_EQ(failing.outcome(), v1::LockResponse::GRANTED);
  v1::UnlockRequest fail;
  fail.set_lease_id(failing.lease().lease_id());
  *fail.mutable_id() = id("bbb222");
  fail.set_outcome(v1::UnlockRequest::FAILED);
  fail.set_log("ERROR 70001");
  v1::UnlockResponse unlocked;
  grpc::ClientContext unlock_context;
  ASSERT_TRUE(stub->Unlock(&unlock_context, fail, &unlocked).ok());
  v1::LockResponse failed = lock("bbb222", true);
  EXPECT_EQ(failed.outcome(), v1::LockResponse::FAILED);
  EXPECT_TRUE(failed.at_once());
  EXPECT_EQ(failed.failure().log(), "ERROR 70001");
  stats = StatsOf(*daemon_);
  EXPECT_EQ(stats.lookups(), 4u);
  EXPECT_EQ(stats.failed_lookups(), 1u);
  EXPECT_EQ(stats.lock_grants(), 2u);
}

TEST_F(ClientRanksTest, WithoutDaemonTheFilesystemProtocolCompilesOnce) {
  RankFleet fleet(root_, Address());
  fleet.Start(kRanks, RankSimCommand(fleet.compile_log(), kGraphs, 300));
  std::vector<RankReport> reports = fleet.WaitAll();
  ExpectRanksAgree(reports,
                   kGraphs);  // each rank checked every sha256: nothing torn
  EXPECT_EQ(fleet.Compiles().size(), static_cast<size_t>(kGraphs));
  for (const RankReport& r : reports) {
    // One warning per process.
    std::vector<absl::string_view> warnings =
        absl::StrSplit(r.err, "fallback mode", absl::SkipEmpty());
    EXPECT_EQ(warnings.size(), 2u) << r.err;
  }
  EXPECT_EQ(CountFiles(root_ + "/debug"), 0);
}

TEST_F(ClientRanksTest, DaemonKilledAndRestartedMidRunEveryRankFinishes) {
  StartDaemon();
  RankFleet fleet(root_, Address());
  // Every rank asks for its last graph only once the restarted daemon has
  // been up longer than the client's longest reconnect backoff (1 s,
  // client/daemon_channel.cc), so each has a call to make after the restart
  // however fast the rest went.
  const std::string restarted_marker = root_ + "/restarted";
  fleet.Start(kRanks,
              RankSimCommand(fleet.compile_log(), kGraphs, 800,
                             {"--last_graph_after=" + restarted_marker}));
  AwaitCompiles(fleet, 3);  // compiles in flight under daemon leases
  daemon_->Signal(SIGKILL);
  daemon_->Wait();
  ASSERT_TRUE(
      WaitUntil([&] { return fleet.FellBack() > 0; }, absl::Seconds(120)))
      << "no rank noticed the daemon was gone";
  DaemonProcess restarted(*daemon_);
  ASSERT_TRUE(restarted.Start()) << restarted.process().Stderr();
  // docs/RELIABILITY.md quotes this figure: the restart's cost while ranks
  // work in fallback mode.
  std::printf("restarted daemon ready in %lld ms with %d ranks in fallback\n",
              static_cast<long long>(
                  absl::ToInt64Milliseconds(restarted.start_duration())),
              fleet.FellBack());
  ASSERT_TRUE(WaitUntil(
      [&] {
        v1::Stats up;
        grpc::ClientContext context;
        return restarted.NewStub()
                   ->GetStats(&context, v1::GetStatsRequest(), &up)
                   .ok() &&
               up.uptime_ms() > 1500;
      },
      absl::Seconds(60)));
  WriteFile(restarted_marker, "");
  std::vector<RankReport> reports = fleet.WaitAll();
  ExpectRanksAgree(reports, kGraphs, /*same_path=*/false);
  int fell_back = 0;
  for (const RankReport& r : reports) {
    fell_back += absl::StrContains(r.err, "fallback mode");
  }
  std::printf("%zu compiles; %d of %d ranks fell back\n",
              fleet.Compiles().size(), fell_back, kRanks);
  EXPECT_GT(fell_back, 0);  // the kill was felt
  // ...and the calls after the restart used the daemon again.
  v1::Stats stats;
  grpc::ClientContext context;
  ASSERT_TRUE(restarted.NewStub()
                  ->GetStats(&context, v1::GetStatsRequest(), &stats)
                  .ok());
  EXPECT_GT(stats.lookups(), 0u);
  EXPECT_LE(fleet.Compiles().size(), static_cast<size_t>(kGraphs + 1));
  EXPECT_EQ(CompilesPerKey(fleet).size(), static_cast<size_t>(kGraphs));
}

TEST_F(ClientRanksTest, HeartbeatKeepsTheLeaseThroughACompileLongerThanTtl) {
  StartDaemon({"--lease_ttl=1"});
  RankFleet fleet(root_, Address());
  fleet.StartOne(0,
                 RankSimCommand(fleet.compile_log(), 1, /*compile_ms=*/4000));
  AwaitCompiles(fleet, 1);
  fleet.StartOne(1, RankSimCommand(fleet.compile_log(), 1, 100));
  std::vector<RankReport> reports = fleet.WaitAll();
  EXPECT_EQ(reports[0].exit_code, 0) << reports[0].out << reports[0].err;
  EXPECT_EQ(reports[1].exit_code, 0) << reports[1].out << reports[1].err;
  EXPECT_TRUE(absl::StrContains(reports[1].out, " waited ")) << reports[1].out;
  EXPECT_EQ(fleet.Compiles().size(), 1u);
}

class KilledRankTest : public ClientRanksTest,
                       public ::testing::WithParamInterface<bool> {};

TEST_P(KilledRankTest, AnotherRankTakesOverAndTheLeftoversAreRemoved) {
  if (GetParam()) StartDaemon();
  RankFleet fleet(root_, Address());
  Process& doomed = fleet.StartOne(
      0, RankSimCommand(fleet.compile_log(), 1, /*compile_ms=*/600000));
  AwaitCompiles(fleet, 1);
  const std::string key = fleet.Compiles()[0].substr(0, 64);
  const std::string workdir = root_ + "/debug/neuronx-cc/" + key;
  // Half the fake NEFF is written before the compile sleeps.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (CountFiles(workdir) < 3 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  Process& heir =
      fleet.StartOne(1, RankSimCommand(fleet.compile_log(), 1, 100));
  // The heir waits: parked in the daemon, or (fallback) polling the key's
  // lock file.
  ASSERT_TRUE(WaitUntil(
      [&] {
        return GetParam() ? LockWaiters(*daemon_) == 1
                          : HasOpenFile(heir.pid(), key + ".lock");
      },
      absl::Seconds(30)))
      << "the heir never waited for the lock";
  EXPECT_EQ(fleet.Compiles().size(), 1u);
  const pid_t dead = doomed.pid();
  // A staged file the doomed rank might have left for the daemon. Written
  // before the kill: the heir may be granted the lease as soon as the rank is
  // gone, and sweeps only what is there by then.
  const std::string staged =
      absl::StrCat(root_, "/local/staging/", key, ".", dead, ".0.staged");
  if (GetParam()) WriteFile(staged, "partial");
  doomed.Signal(SIGKILL);
  doomed.Wait();
  EXPECT_EQ(heir.Wait(), 0) << heir.Stdout() << heir.Stderr();
  EXPECT_TRUE(absl::StartsWith(heir.Stdout(), "OK 0 " + key)) << heir.Stdout();
  ASSERT_EQ(fleet.Compiles().size(), 2u);
  EXPECT_FALSE(absl::StrContains(fleet.Compiles()[1], absl::StrCat(" ", dead)));
  EXPECT_EQ(CountFiles(root_ + "/local/staging"), 0);
  EXPECT_EQ(CountFiles(workdir), 0);  // partial module.neff gone
  EXPECT_EQ(CountFiles(FilesOf(root_ + "/neff", key).records),
            1);  // model.done
  fleet.WaitAll();
}

INSTANTIATE_TEST_SUITE_P(DaemonAndFallback, KilledRankTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Daemon" : "Fallback";
                         });

class FailureTest : public ClientRanksTest,
                    public ::testing::WithParamInterface<bool> {};

// A failing compile is compiled once and every rank gets the same failure
// until its retry-after; then it is compiled again.
TEST_P(FailureTest, DeterministicFailureIsSharedUntilRetryAfter) {
  if (GetParam()) StartDaemon({"--failed_ttl=4"});
  constexpr int kFailRanks = 16;
  RankFleet fleet(root_, Address());
  const std::vector<std::string> command =
      RankSimCommand(fleet.compile_log(), 1, 500, {"--fail_graphs=0"});
  // Fallback mode records failures for failed_ttl = 1 h (the daemon's
  // default), so only the daemon run checks the expiry.
  fleet.Start(kFailRanks, command);
  std::vector<RankReport> reports = fleet.WaitAll();
  std::set<std::string> logs;
  std::vector<int64_t> retry_after;
  for (const RankReport& r : reports) {
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    std::vector<std::string> f = absl::StrSplit(r.out, absl::MaxSplits(' ', 4));
    ASSERT_EQ(f.size(), 5u) << r.out;
    EXPECT_EQ(f[0], "FAILED");
    int64_t ms = 0;
    EXPECT_TRUE(absl::SimpleAtoi(f[3], &ms));
    retry_after.push_back(ms);
    logs.insert(f[4]);
  }
  EXPECT_EQ(fleet.Compiles().size(), 1u);
  EXPECT_EQ(logs.size(), 1u);
  EXPECT_TRUE(absl::StrContains(*logs.begin(), "ERROR 70001")) << *logs.begin();
  const auto [lo, hi] =
      std::minmax_element(retry_after.begin(), retry_after.end());
  EXPECT_GT(*lo, absl::ToUnixMillis(absl::Now()));
  EXPECT_LE(*hi - *lo, 1000);  // one recorded failure

  if (!GetParam()) return;
  absl::SleepFor(absl::Milliseconds(*hi - absl::ToUnixMillis(absl::Now())) +
                 absl::Milliseconds(200));
  fleet.StartOne(0, command);
  EXPECT_EQ(fleet.WaitAll()[0].exit_code, 0);
  EXPECT_EQ(fleet.Compiles().size(), 2u);  // compiled (and failed) again
}

INSTANTIATE_TEST_SUITE_P(DaemonAndFallback, FailureTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Daemon" : "Fallback";
                         });

}  // namespace
}  // namespace neffd::test_support
