// SIGTERM with ranks attached: `systemctl restart neffd` must not wait out
// --shutdown_grace because ranks are connected. 32 clients, each on its own
// connection: lease holders on Hold streams, Lock calls parked behind them,
// a health Watch, a Publish in flight and, in a process of their own, idle
// connections (ranks between compiles). After SIGTERM the daemon exits 0
// well within the grace, every waiting call ends with a status (none
// hangs), and the publish in flight completes: its entry is a hit after a
// restart. Before the fix the idle connections alone held the daemon for
// the whole grace: gRPC's graceful GOAWAY waits for each client's ping
// answer, which an idle client sends only on its 5 s backup poll.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

constexpr char kVersion[] = "2.19.1";
constexpr int kClients = 32;
constexpr int kHolders = 8;  // clients 0-7 hold a lease each
constexpr int kWaiters = 8;  // clients 8-15 wait for those keys
constexpr int kPublisher = kHolders + kWaiters;  // client 16
constexpr int kWatcher = kPublisher + 1;         // client 17
constexpr int kIdle = kClients - kWatcher - 1;   // 14 in another process
// The publish in flight: large enough to be caught publishing, small enough
// to finish well within the bound.
constexpr uint64_t kPublishBytes = uint64_t{64} << 20;
constexpr char kPublishSha256[] =  // of kPublishBytes zeros
    "3b6a07d0d404fab4e23b6d34bc6696a6a312dd92821332385e5af7c01c421351";

// From SIGTERM to exit, the publish included (0.3-0.8 s here, plain or
// under ASan); the grace is 10 s, and before the fix the idle connections
// alone took all of it (10.3 s).
constexpr absl::Duration kStopBound = absl::Seconds(3);
// From the publish's answer (the last call in progress) to exit: index
// flush and the rest of the stop (130-290 ms measured).
constexpr absl::Duration kAfterLastCallBound = absl::Seconds(1);

std::shared_ptr<grpc::Channel> Connect(const DaemonProcess& daemon,
                                       int client) {
  grpc::ChannelArguments args;  // a distinct argument: a connection each
  args.SetInt("neffd.client", client);
  return grpc::CreateCustomChannel(daemon.address(),
                                   grpc::InsecureChannelCredentials(), args);
}

v1::LockRequest LockOn(const std::string& key) {
  v1::LockRequest lock;
  lock.mutable_id()->set_namespace_("neff");
  lock.mutable_id()->set_compiler_version(kVersion);
  lock.mutable_id()->set_key(key);
  lock.set_wait(true);
  lock.set_wait_seconds(600);  // far beyond the test: only shutdown ends it
  return lock;
}

v1::EntryId Id(const std::string& key) { return LockOn(key).id(); }

// A rank that was granted a lease and keeps it on a Hold stream, as the
// client library does while it compiles.
struct Holder {
  std::unique_ptr<v1::CompileCache::Stub> stub;
  grpc::ClientContext context;
  std::unique_ptr<
      grpc::ClientReaderWriter<v1::KeepAliveRequest, v1::KeepAliveResponse>>
      stream;
};

// Finished streams and calls, by what they ended with.
struct Ended {
  absl::Mutex mu;
  std::vector<std::string> statuses ABSL_GUARDED_BY(mu);
  void Add(const std::string& who, const grpc::Status& status) {
    absl::MutexLock lock(&mu);
    statuses.push_back(absl::StrCat(who, ": ", status.error_code(), " ",
                                    status.error_message()));
  }
};

TEST(ShutdownTest, SigtermWithRanksAttachedEndsTheirCallsAndExitsAtOnce) {
  const std::string root = TestTempDir();
  // The default grace, and a TTL the test never reaches: only the shutdown
  // can end what is waiting.
  DaemonProcess daemon(root, {"--shutdown_grace=10", "--lease_ttl=600"});
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  // The idle ranks: in a process of their own, so that no call of this one
  // reads their sockets for them.
  Process idle({Runfile("tests/lock_holder"), "--address=" + daemon.address(),
                "--compiler_version=" + std::string(kVersion), "--key=idle",
                absl::StrCat("--idle_connections=", kIdle)});
  ASSERT_TRUE(
      PollUntil([&] { return absl::StrContains(idle.Stdout(), "IDLE"); },
                absl::Seconds(30)))
      << idle.Stdout() << idle.Stderr();
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c <= kWatcher; ++c) {
    channels.push_back(Connect(daemon, c));
    ASSERT_TRUE(channels.back()->WaitForConnected(
        std::chrono::system_clock::now() + std::chrono::seconds(10)));
  }

  // Holders: a lease each, kept on a Hold stream.
  std::vector<std::unique_ptr<Holder>> holders;
  for (int h = 0; h < kHolders; ++h) {
    auto holder = std::make_unique<Holder>();
    holder->stub = v1::CompileCache::NewStub(channels[h]);
    v1::LockResponse granted;
    grpc::ClientContext context;
    ASSERT_TRUE(
        holder->stub->Lock(&context, LockOn(absl::StrCat("held", h)), &granted)
            .ok());
    ASSERT_EQ(granted.outcome(), v1::LockResponse::GRANTED);
    holder->stream = holder->stub->Hold(&holder->context);
    v1::KeepAliveRequest renew;
    renew.set_lease_id(granted.lease().lease_id());
    v1::KeepAliveResponse renewed;
    ASSERT_TRUE(holder->stream->Write(renew));
    ASSERT_TRUE(holder->stream->Read(&renewed))
        << holder->stream->Finish().error_message() << "\n"
        << daemon.process().Stderr();
    holders.push_back(std::move(holder));
  }

  Ended ended;
  std::vector<std::thread> calls;
  // Waiters: a Lock each on a held key, parked until the key is published.
  for (int w = 0; w < kWaiters; ++w) {
    calls.emplace_back([&, w] {
      auto stub = v1::CompileCache::NewStub(channels[kHolders + w]);
      v1::LockResponse response;
      grpc::ClientContext context;
      grpc::Status status =
          stub->Lock(&context, LockOn(absl::StrCat("held", w)), &response);
      ended.Add(
          absl::StrCat("waiter ", w, " (outcome ", response.outcome(), ")"),
          status);
    });
  }
  ASSERT_TRUE(PollUntil([&] { return LockWaiters(daemon) == kWaiters; },
                        absl::Seconds(30)));

  // A health Watch, as a job scheduler keeps one.
  std::atomic<bool> watching{false};
  grpc::health::v1::HealthCheckResponse last_health;
  grpc::Status watch_ended;
  calls.emplace_back([&] {
    auto health = grpc::health::v1::Health::NewStub(channels[kWatcher]);
    grpc::ClientContext context;
    auto watch =
        health->Watch(&context, grpc::health::v1::HealthCheckRequest());
    while (watch->Read(&last_health)) watching = true;
    watch_ended = watch->Finish();
  });
  ASSERT_TRUE(PollUntil([&] { return watching.load(); }, absl::Seconds(30)));

  // The publish in flight.
  auto publisher = v1::CompileCache::NewStub(channels[kPublisher]);
  v1::LockResponse granted;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(publisher->Lock(&context, LockOn("published"), &granted).ok());
    ASSERT_EQ(granted.outcome(), v1::LockResponse::GRANTED);
  }
  const std::string staged = granted.lease().staging_dir() + "/big.neff";
  WriteFile(staged, "");
  ASSERT_EQ(truncate(staged.c_str(), kPublishBytes), 0);  // sparse zeros
  v1::PublishRequest publish;
  publish.set_lease_id(granted.lease().lease_id());
  *publish.mutable_id() = Id("published");
  publish.set_staged_path(staged);
  publish.set_size(kPublishBytes);
  publish.set_sha256(kPublishSha256);
  grpc::Status published;
  v1::PublishResponse published_response;
  absl::Time published_at;
  std::thread publishing([&] {
    grpc::ClientContext context;
    published = publisher->Publish(&context, publish, &published_response);
    published_at = absl::Now();
  });
  ASSERT_TRUE(PollUntil(
      [&] {
        const v1::LocksResponse locks = GetLocks(daemon);
        for (const v1::LeaseInfo& lease : locks.leases()) {
          if (lease.publishing()) return true;
        }
        return false;
      },
      absl::Seconds(30)))
      << "the publish never started";

  const absl::Time term = absl::Now();
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0) << daemon.process().Stderr();
  const absl::Duration stopped = absl::Now() - term;
  publishing.join();
  std::printf("SIGTERM to exit: %.0f ms (the publish answered after %.0f ms)\n",
              absl::ToDoubleMilliseconds(stopped),
              absl::ToDoubleMilliseconds(published_at - term));
  EXPECT_LE(stopped, kStopBound) << daemon.process().Stderr();
  EXPECT_LE(term + stopped - published_at, kAfterLastCallBound)
      << daemon.process().Stderr();

  // Every call that waited has ended, with a status a rank reads as "the
  // daemon went away" (never OK with an answer it could act on).
  for (std::thread& call : calls) call.join();
  for (auto& holder : holders) {
    v1::KeepAliveResponse more;
    EXPECT_FALSE(holder->stream->Read(&more));
    ended.Add("holder", holder->stream->Finish());
  }
  {
    absl::MutexLock lock(&ended.mu);
    ASSERT_EQ(ended.statuses.size(), size_t{kHolders + kWaiters});
    for (const std::string& status : ended.statuses) {
      std::printf("%s\n", status.c_str());
      EXPECT_TRUE(absl::StrContains(status, ": 14 ")) << status;  // UNAVAILABLE
    }
  }
  // The Watch's last word is NOT_SERVING, then the stream is finished.
  EXPECT_EQ(last_health.status(),
            grpc::health::v1::HealthCheckResponse::NOT_SERVING);
  EXPECT_TRUE(watch_ended.ok()) << watch_ended.error_message();
  ASSERT_TRUE(published.ok()) << published.error_message();
  EXPECT_EQ(published_response.outcome(), v1::PublishResponse::PUBLISHED);

  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  v1::LookupRequest lookup;
  *lookup.mutable_id() = Id("published");
  v1::LookupResponse hit;
  grpc::ClientContext context;
  ASSERT_TRUE(daemon.NewStub()->Lookup(&context, lookup, &hit).ok());
  EXPECT_EQ(hit.result(), v1::LookupResponse::HIT);
  EXPECT_EQ(hit.entry().size(), kPublishBytes);
  EXPECT_EQ(hit.entry().sha256(), kPublishSha256);
}

}  // namespace
}  // namespace neffd::test_support
