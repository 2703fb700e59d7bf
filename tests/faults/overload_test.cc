// Overload: 2,000 waiters parked on one key and 1,000 clients connecting at
// once. No crash, every waiter gets its answer, the daemon's fd count
// returns to where it was (no leak), memory stays bounded, and requests
// beyond a configured limit get RESOURCE_EXHAUSTED at once instead of
// hanging.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "tests/faults/wire.h"
#include "tests/harness/process.h"

namespace neffd::testing {
namespace {

constexpr int kWaiters = 2000;
constexpr int kClients = 1000;
constexpr long kRssLimitKib = 1 << 20;  // 1 GiB

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

class OverloadTest : public ::testing::Test {
 protected:
  void SetUp() override {
    RaiseFdLimit();
    daemon_ = std::make_unique<DaemonProcess>(
        NewTempDir("overload"),
        std::vector<std::string>{"--max_leases_per_pid=8"});
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
    stub_ = daemon_->NewStub();
    // One warm-up call so the baseline includes the server's own fds.
    LookupContent(*stub_, "warmup");
    baseline_fds_ = SettledFds(daemon_->process().pid());
  }

  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::CompileCache::Stub> stub_;
  int baseline_fds_ = 0;
};

TEST_F(OverloadTest, TwoThousandWaitersAllGetTheEntry) {
  v1::LockResponse held = LockKey(*stub_, "hot", getpid());
  ASSERT_EQ(held.outcome(), v1::LockResponse::GRANTED);

  struct Call {
    grpc::ClientContext context;
    v1::LockRequest request;
    v1::LockResponse response;
  };
  std::vector<std::unique_ptr<Call>> calls;
  absl::BlockingCounter answered(kWaiters);
  std::atomic<int> ready{0}, errors{0};
  for (int i = 0; i < kWaiters; ++i) {
    auto call = std::make_unique<Call>();
    *call->request.mutable_id() = Id("neff", "1.0", "hot");
    call->request.mutable_holder()->set_pid(100000 + i);
    call->request.set_wait(true);
    call->request.set_wait_seconds(300);
    Call* c = call.get();
    stub_->async()->Lock(
        &c->context, &c->request, &c->response, [&, c](grpc::Status s) {
          if (!s.ok()) {
            ++errors;
          } else if (c->response.outcome() == v1::LockResponse::READY) {
            ++ready;
          }
          answered.DecrementCount();
        });
    calls.push_back(std::move(call));
  }
  // All parked: the daemon reports them.
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  uint64_t waiters = 0;
  while (absl::Now() < deadline) {
    v1::Stats stats;
    grpc::ClientContext context;
    if (stub_->GetStats(&context, {}, &stats).ok()) waiters = stats.waiters();
    if (waiters == kWaiters) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(waiters, uint64_t{kWaiters});
  const long rss_parked = RssKib(daemon_->process().pid());
  EXPECT_LT(rss_parked, kRssLimitKib);

  ASSERT_TRUE(PublishStaged(*stub_, held.lease(), "hot artifact").ok());
  answered.Wait();
  EXPECT_EQ(ready.load(), kWaiters);
  EXPECT_EQ(errors.load(), 0);
  calls.clear();
  EXPECT_TRUE(daemon_->process().Running());
  EXPECT_LE(SettledFds(daemon_->process().pid()), baseline_fds_ + 2);
  RecordProperty("waiters", kWaiters);
  RecordProperty("rss_kib_parked", static_cast<int>(rss_parked));
}

TEST_F(OverloadTest, ThousandClientsConnectingAtOnceLeakNoFds) {
  std::vector<std::unique_ptr<v1::CompileCache::Stub>> stubs;
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int i = 0; i < kClients; ++i) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // one socket each
    args.SetInt("grpc.channel_id", i);                   // never shared
    channels.push_back(grpc::CreateCustomChannel(
        daemon_->address(), grpc::InsecureChannelCredentials(), args));
    stubs.push_back(v1::CompileCache::NewStub(channels.back()));
  }
  struct Call {
    grpc::ClientContext context;
    v1::LookupRequest request;
    v1::LookupResponse response;
  };
  std::vector<std::unique_ptr<Call>> calls;
  absl::BlockingCounter answered(kClients);
  std::atomic<int> ok{0};
  for (int i = 0; i < kClients; ++i) {
    auto call = std::make_unique<Call>();
    *call->request.mutable_id() = Id("neff", "1.0", absl::StrCat("k", i));
    call->context.set_deadline(std::chrono::system_clock::now() +
                               std::chrono::seconds(120));
    Call* c = call.get();
    stubs[i]->async()->Lookup(&c->context, &c->request, &c->response,
                              [&](grpc::Status s) {
                                if (s.ok()) ++ok;
                                answered.DecrementCount();
                              });
    calls.push_back(std::move(call));
  }
  answered.Wait();
  EXPECT_EQ(ok.load(), kClients);
  const int connected_fds = CountFds(daemon_->process().pid());
  EXPECT_GE(connected_fds, baseline_fds_ + kClients / 2);  // really connected
  const long rss = RssKib(daemon_->process().pid());
  EXPECT_LT(rss, kRssLimitKib);
  calls.clear();
  stubs.clear();
  channels.clear();
  EXPECT_LE(SettledFds(daemon_->process().pid()), baseline_fds_ + 2);
  EXPECT_TRUE(daemon_->process().Running());
  RecordProperty("clients", kClients);
  RecordProperty("fds_connected", connected_fds);
  RecordProperty("fds_baseline", baseline_fds_);
}

TEST_F(OverloadTest, LeasesBeyondThePerProcessLimitAreRefusedNotHung) {
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
}  // namespace neffd::testing
