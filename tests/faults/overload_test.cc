// Overload: 2,000 waiters parked on one key and 1,000 clients connecting at
// once. No crash, every call gets an answer (never a hang), the daemon's fd
// count returns to where it was (no leak), memory stays bounded, and
// requests beyond a configured limit (--max_lock_waiters, --max_rpc_threads,
// --max_leases_per_pid) get RESOURCE_EXHAUSTED at once.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "tests/faults/wire.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

constexpr int kWaiters = 2000;
constexpr int kClients = 1000;
constexpr long kRssLimitKib = 1 << 20;  // 1 GiB
// Generous: only a hung daemon takes this long, even under ASan on 2 cores.
constexpr absl::Duration kPatience = absl::Minutes(3);

void RaiseFdLimit() {
  struct rlimit limit;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  limit.rlim_cur = limit.rlim_max;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &limit), 0);
  ASSERT_GE(limit.rlim_cur, rlim_t{kClients + 200}) << "fd limit too low";
}

// The daemon's fd count, once it has stopped changing (closed connections
// are reaped asynchronously).
int SettledFds(pid_t pid) {
  int last = CountFds(pid);
  for (int i = 0; i < 100; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    int now = CountFds(pid);
    if (now == last && i >= 5) return now;
    last = now;
  }
  return last;
}

// How a batch of asynchronous calls was answered. Thread-safe.
class Answers {
 public:
  void Add(const grpc::Status& status, bool ready) {
    absl::MutexLock lock(&mu_);
    ++answered_;
    if (status.ok()) {
      ++(ready ? ready_ : ok_);
    } else if (status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) {
      ++exhausted_;
    } else {
      ++errors_;
      last_error_ = status.error_message();
    }
  }
  // Waits until `n` calls were answered RESOURCE_EXHAUSTED (true), or
  // kPatience passed (false).
  bool AwaitExhausted(int n) {
    absl::MutexLock lock(&mu_);
    auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return exhausted_ >= n;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&reached), kPatience);
  }
  int answered() const { return Get(&Answers::answered_); }
  int ready() const { return Get(&Answers::ready_); }
  int ok() const { return Get(&Answers::ok_); }
  int exhausted() const { return Get(&Answers::exhausted_); }
  int errors() const { return Get(&Answers::errors_); }
  std::string last_error() const {
    absl::MutexLock lock(&mu_);
    return last_error_;
  }

 private:
  int Get(int Answers::*field) const {
    absl::MutexLock lock(&mu_);
    return this->*field;
  }
  mutable absl::Mutex mu_;
  int answered_ ABSL_GUARDED_BY(mu_) = 0;
  int ready_ ABSL_GUARDED_BY(mu_) = 0;
  int ok_ ABSL_GUARDED_BY(mu_) = 0;
  int exhausted_ ABSL_GUARDED_BY(mu_) = 0;
  int errors_ ABSL_GUARDED_BY(mu_) = 0;
  std::string last_error_ ABSL_GUARDED_BY(mu_);
};

// Calls in flight at once, counted into Answers as they are answered.
// Destroying it waits for every answer.
class InFlight {
 public:
  explicit InFlight(int n) : done_(n) {}
  ~InFlight() { WaitAll(); }
  // Returns once every call was answered. (BlockingCounter::Wait may be
  // called once only.)
  void WaitAll() {
    if (!waited_) done_.Wait();
    waited_ = true;
  }
  Answers& answers() { return answers_; }

 protected:
  void Answered(const grpc::Status& status, bool ready) {
    answers_.Add(status, ready);
    done_.DecrementCount();
  }

 private:
  Answers answers_;
  absl::BlockingCounter done_;
  bool waited_ = false;
};

// `n` Lock(wait) calls on neff/1.0/{key} from n different pids, in flight
// at once on one channel.
class Waiters : public InFlight {
 public:
  Waiters(v1::CompileCache::Stub& stub, const std::string& key, int n)
      : InFlight(n) {
    for (int i = 0; i < n; ++i) {
      auto call = std::make_unique<Call>();
      *call->request.mutable_id() = Id("neff", "1.0", key);
      call->request.mutable_holder()->set_pid(100000 + i);
      call->request.set_wait(true);
      call->request.set_wait_seconds(300);
      Call* c = call.get();
      stub.async()->Lock(
          &c->context, &c->request, &c->response, [this, c](grpc::Status s) {
            Answered(s, c->response.outcome() == v1::LockResponse::READY);
          });
      calls_.push_back(std::move(call));
    }
  }
  ~Waiters() { WaitAll(); }  // before calls_ goes

 private:
  struct Call {
    grpc::ClientContext context;
    v1::LockRequest request;
    v1::LockResponse response;
  };
  std::vector<std::unique_ptr<Call>> calls_;
};

// `n` clients, each on a connection of its own, sending one call at once:
// Lookup (served on gRPC's callback threads, like Lock) or GetStats (served
// by the synchronous thread pool that --max_rpc_threads bounds).
class Clients : public InFlight {
 public:
  enum class Method { kLookup, kGetStats };

  Clients(const std::string& address, int n, Method method = Method::kLookup)
      : InFlight(n) {
    for (int i = 0; i < n; ++i) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one socket each
      args.SetInt("grpc.channel_id", i);                   // never shared
      channels_.push_back(grpc::CreateCustomChannel(
          address, grpc::InsecureChannelCredentials(), args));
      stubs_.push_back(v1::CompileCache::NewStub(channels_.back()));
    }
    for (int i = 0; i < n; ++i) {
      auto call = std::make_unique<Call>();
      *call->request.mutable_id() = Id("neff", "1.0", absl::StrCat("k", i));
      // A hang guard, not a timing assertion: DEADLINE_EXCEEDED fails it.
      call->context.set_deadline(absl::ToChronoTime(absl::Now() + kPatience));
      Call* c = call.get();
      auto answered = [this](grpc::Status s) { Answered(s, false); };
      if (method == Method::kLookup) {
        stubs_[i]->async()->Lookup(&c->context, &c->request, &c->response,
                                   answered);
      } else {
        stubs_[i]->async()->GetStats(&c->context, &c->stats_request, &c->stats,
                                     answered);
      }
      calls_.push_back(std::move(call));
    }
  }
  ~Clients() { WaitAll(); }  // before calls_ and the channels go

 private:
  struct Call {
    grpc::ClientContext context;
    v1::LookupRequest request;
    v1::LookupResponse response;
    v1::GetStatsRequest stats_request;
    v1::Stats stats;
  };
  std::vector<std::shared_ptr<grpc::Channel>> channels_;
  std::vector<std::unique_ptr<v1::CompileCache::Stub>> stubs_;
  std::vector<std::unique_ptr<Call>> calls_;
};

class OverloadTest : public ::testing::Test {
 protected:
  void SetUp() override { RaiseFdLimit(); }

  // Starts the daemon (after the fd limit is raised: it inherits it).
  void StartDaemon(std::vector<std::string> flags) {
    daemon_ = std::make_unique<DaemonProcess>(NewTempDir("overload"),
                                              std::move(flags));
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
    stub_ = daemon_->NewStub();
    // One warm-up call so the baseline includes the server's own fds.
    LookupContent(*stub_, "warmup");
    baseline_fds_ = SettledFds(pid());
  }
  pid_t pid() { return daemon_->process().pid(); }

  // The daemon's count of parked waiters once it reaches `n` (or the last
  // count seen after kPatience).
  uint64_t AwaitParked(uint64_t n) {
    const absl::Time deadline = absl::Now() + kPatience;
    uint64_t waiters = 0;
    while (absl::Now() < deadline) {
      v1::Stats stats;
      grpc::ClientContext context;
      if (stub_->GetStats(&context, {}, &stats).ok()) waiters = stats.waiters();
      if (waiters == n) break;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return waiters;
  }

  // After the clients are gone: the daemon runs and holds the fds it held
  // before they came.
  void ExpectRecovered() {
    EXPECT_TRUE(daemon_->process().Running());
    EXPECT_EQ(SettledFds(pid()), baseline_fds_);
    EXPECT_EQ(LookupContent(*stub_, "after"), "");
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::CompileCache::Stub> stub_;
  int baseline_fds_ = 0;
};

TEST_F(OverloadTest, TwoThousandWaitersAllGetTheEntry) {
  StartDaemon({});
  v1::LockResponse held = LockKey(*stub_, "hot", getpid());
  ASSERT_EQ(held.outcome(), v1::LockResponse::GRANTED);
  long rss_parked = 0;
  {
    Waiters waiters(*stub_, "hot", kWaiters);
    EXPECT_EQ(AwaitParked(kWaiters), uint64_t{kWaiters});
    rss_parked = RssKib(pid());
    EXPECT_LT(rss_parked, kRssLimitKib);
    ASSERT_TRUE(PublishStaged(*stub_, held.lease(), "hot artifact").ok());
    waiters.WaitAll();
    EXPECT_EQ(waiters.answers().ready(), kWaiters);
    EXPECT_EQ(waiters.answers().errors(), 0) << waiters.answers().last_error();
  }
  ExpectRecovered();
  RecordProperty("waiters", kWaiters);
  RecordProperty("rss_kib_parked", static_cast<int>(rss_parked));
}

TEST_F(OverloadTest, WaitersBeyondTheCapAreRefusedAtOnceNotHung) {
  constexpr int kCap = 100;
  StartDaemon({absl::StrCat("--max_lock_waiters=", kCap)});
  v1::LockResponse held = LockKey(*stub_, "capped", getpid());
  ASSERT_EQ(held.outcome(), v1::LockResponse::GRANTED);
  {
    Waiters waiters(*stub_, "capped", kWaiters);
    // Refused while the key is still held: nobody waits for the holder.
    ASSERT_TRUE(waiters.answers().AwaitExhausted(kWaiters - kCap));
    EXPECT_EQ(AwaitParked(kCap), uint64_t{kCap});
    EXPECT_EQ(waiters.answers().answered(), kWaiters - kCap);
    ASSERT_TRUE(PublishStaged(*stub_, held.lease(), "capped artifact").ok());
    waiters.WaitAll();
    EXPECT_EQ(waiters.answers().ready(), kCap);
    EXPECT_EQ(waiters.answers().exhausted(), kWaiters - kCap);
    EXPECT_EQ(waiters.answers().errors(), 0) << waiters.answers().last_error();
  }
  // A refused client that asks again once the storm is over is served.
  EXPECT_EQ(LockKey(*stub_, "capped", 4242).outcome(), v1::LockResponse::READY);
  ExpectRecovered();
  RecordProperty("waiters_refused", kWaiters - kCap);
}

TEST_F(OverloadTest, ThousandClientsConnectingAtOnceLeakNoFds) {
  StartDaemon({});
  int connected_fds = 0;
  {
    Clients clients(daemon_->address(), kClients);
    clients.WaitAll();
    EXPECT_EQ(clients.answers().ok(), kClients)
        << clients.answers().last_error();
    connected_fds = CountFds(pid());
    EXPECT_GE(connected_fds, baseline_fds_ + kClients / 2);  // really connected
    EXPECT_LT(RssKib(pid()), kRssLimitKib);
  }
  ExpectRecovered();
  RecordProperty("clients", kClients);
  RecordProperty("fds_connected", connected_fds);
  RecordProperty("fds_baseline", baseline_fds_);
}

// With every gRPC thread of the synchronous pool busy, its calls (GetStats
// here) are refused, not queued until they time out. Health Watch streams hold
// a thread each for as long as they are open, which makes "every thread busy"
// exact: with --max_rpc_threads=4 and three Watches open, the one thread left
// polls for calls and may not serve them.
TEST_F(OverloadTest, ThousandClientsBeyondTheThreadCapAreRefusedNotHung) {
  constexpr int kThreads = 4;
  StartDaemon({absl::StrCat("--max_rpc_threads=", kThreads)});
  auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      daemon_->address(), grpc::InsecureChannelCredentials()));
  struct Watch {
    grpc::ClientContext context;
    std::unique_ptr<grpc::ClientReader<grpc::health::v1::HealthCheckResponse>>
        reader;
  };
  std::vector<std::unique_ptr<Watch>> watches;
  for (int i = 0; i + 1 < kThreads; ++i) {
    auto watch = std::make_unique<Watch>();
    watch->reader = health->Watch(&watch->context, {});
    grpc::health::v1::HealthCheckResponse first;
    ASSERT_TRUE(watch->reader->Read(&first));  // its thread is serving it
    watches.push_back(std::move(watch));
  }
  int refused = 0;
  {
    Clients clients(daemon_->address(), kClients, Clients::Method::kGetStats);
    clients.WaitAll();
    refused = clients.answers().exhausted();
    // Served or refused, nothing else (a hung call ends DEADLINE_EXCEEDED).
    EXPECT_EQ(clients.answers().ok() + refused, kClients);
    EXPECT_EQ(clients.answers().errors(), 0) << clients.answers().last_error();
    EXPECT_GT(refused, 0);
  }
  for (auto& watch : watches) {
    watch->context.TryCancel();
    (void)watch->reader->Finish();
  }
  watches.clear();
  health.reset();
  // The threads come back once the Watches end: calls are served again.
  const absl::Time deadline = absl::Now() + kPatience;
  grpc::Status stats_status;
  while (absl::Now() < deadline) {
    grpc::ClientContext context;
    v1::Stats stats;
    stats_status = stub_->GetStats(&context, {}, &stats);
    if (stats_status.ok()) break;
    absl::SleepFor(absl::Milliseconds(100));
  }
  EXPECT_TRUE(stats_status.ok()) << stats_status.error_message();
  ExpectRecovered();
  RecordProperty("clients_refused", refused);
}

TEST_F(OverloadTest, LeasesBeyondThePerProcessLimitAreRefusedNotHung) {
  StartDaemon({"--max_leases_per_pid=8"});
  std::vector<v1::Lease> leases;
  for (int i = 0; i < 8; ++i) {
    v1::LockResponse r = LockKey(*stub_, absl::StrCat("lim", i), 4242);
    ASSERT_EQ(r.outcome(), v1::LockResponse::GRANTED);
    leases.push_back(r.lease());
  }
  grpc::Status status;
  LockKey(*stub_, "lim8", 4242, 30, &status);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_TRUE(absl::StartsWith(status.error_message(), "holder.pid"));
  // Another process is not affected, and publishing frees a slot.
  EXPECT_EQ(LockKey(*stub_, "lim8", 4343).outcome(), v1::LockResponse::GRANTED);
  ASSERT_TRUE(PublishStaged(*stub_, leases[0], "x").ok());
  EXPECT_EQ(LockKey(*stub_, "lim9", 4242).outcome(), v1::LockResponse::GRANTED);
}

}  // namespace
}  // namespace neffd::test_support
