// Issue 18, part 1: a shared-filesystem call that hangs (a stalled FSx
// server, here the fault-injecting Env's Stall) delays its own key only.
// Against a real Daemon in this process on a real unix socket: while one
// key's lease-file refresh and lookups are stuck, other keys are served and
// published, GetStats answers, and this host's live lease is refreshed on
// time, so a peer host watching it never judges it stale.
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/locks/file_locks.h"
#include "daemon/runtime/daemon.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "store/digest.h"
#include "store/entry_id.h"
#include "store/layout.h"
#include "store/testing/fault_injection_env.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

constexpr char kVersion[] = "2.19.1";
constexpr absl::Duration kTtl = absl::Milliseconds(1500);

v1::EntryId Neff(const std::string& key) {
  return EntryKey::Parse("neff", kVersion, key)->ToProto();
}

class StalledStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir("stalled_");
    char socket_dir[] = "/tmp/neffd-stalled-test.XXXXXX";
    ASSERT_NE(mkdtemp(socket_dir), nullptr);
    socket_dir_ = socket_dir;
    DaemonOptions options;
    options.address = absl::StrCat("unix:", socket_dir_, "/neffd.sock");
    options.admin_address = absl::StrCat("unix:", socket_dir_, "/admin.sock");
    options.neff_cache_dir = root_ + "/neff";
    options.hlo_cache_dir = root_ + "/hlo";
    options.local_dir = root_ + "/local";
    options.host_id = "this-host";
    options.lease_ttl = kTtl;
    options.poll_interval = absl::Milliseconds(100);
    options.env = &env_;
    absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    channel_ = grpc::CreateChannel(options.address,
                                   grpc::InsecureChannelCredentials());
    cache_ = v1::CompileCache::NewStub(channel_);
  }

  void TearDown() override {
    env_.Release();
    if (daemon_ != nullptr) daemon_->Shutdown();
    daemon_.reset();
    rmdir(socket_dir_.c_str());
  }

  // Lookup with a deadline; how long it took, or InfiniteDuration if it
  // failed.
  absl::Duration TimedLookup(v1::CompileCache::Stub& stub,
                             const std::string& key,
                             v1::LookupResponse::Result* result = nullptr) {
    v1::LookupRequest request;
    *request.mutable_id() = Neff(key);
    v1::LookupResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(2));
    const absl::Time start = absl::Now();
    if (!stub.Lookup(&context, request, &response).ok()) {
      return absl::InfiniteDuration();
    }
    if (result != nullptr) *result = response.result();
    return absl::Now() - start;
  }

  std::string Grant(const std::string& key) {
    v1::LockRequest request;
    *request.mutable_id() = Neff(key);
    request.mutable_holder()->set_host("this-host");
    request.mutable_holder()->set_pid(getpid());
    v1::LockResponse response;
    grpc::ClientContext context;
    EXPECT_TRUE(cache_->Lock(&context, request, &response).ok());
    EXPECT_EQ(response.outcome(), v1::LockResponse::GRANTED);
    return response.lease().lease_id();
  }

  absl::Status Publish(const std::string& key) {
    const std::string lease_id = Grant(key);
    const std::string bytes = "neff of " + key;
    v1::PublishRequest request;
    request.set_lease_id(lease_id);
    *request.mutable_id() = Neff(key);
    request.set_inline_bytes(bytes);
    request.set_size(bytes.size());
    request.set_sha256(Sha256Hex(bytes));
    v1::PublishResponse response;
    grpc::ClientContext context;
    grpc::Status status = cache_->Publish(&context, request, &response);
    return status.ok() ? absl::OkStatus()
                       : absl::InternalError(status.error_message());
  }

  std::string root_, socket_dir_;
  FaultInjectionEnv env_;
  std::unique_ptr<Daemon> daemon_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::CompileCache::Stub> cache_;
};

TEST_F(StalledStoreTest, OneStalledKeyDelaysNothingElse) {
  ASSERT_TRUE(Publish("served").ok());
  // The live lease a peer host watches, renewed by its holder throughout.
  const std::string live = Grant("live");
  std::atomic<bool> stop{false};
  std::thread holder([&] {
    auto stub = v1::CompileCache::NewStub(channel_);
    while (!stop) {
      v1::KeepAliveRequest request;
      request.set_lease_id(live);
      v1::KeepAliveResponse response;
      grpc::ClientContext context;
      EXPECT_TRUE(stub->KeepAlive(&context, request, &response).ok());
      absl::SleepFor(kTtl / 5);
    }
  });

  // A lease on the stalled key, whose next lease-file refresh hangs, and
  // lookups of it that hang in the store: every call on its directory
  // blocks from now on.
  Grant("stalled");
  env_.Stall(FsOp::kTouch, "/stalled.neff");
  ASSERT_TRUE(env_.AwaitStalled(kTtl));
  env_.Stall(std::nullopt, "/stalled.neff");
  std::vector<std::thread> stuck;
  for (int i = 0; i < 16; ++i) {
    stuck.emplace_back([&] {
      auto stub = v1::CompileCache::NewStub(channel_);
      (void)TimedLookup(*stub, "stalled");
    });
  }

  // A peer host watching the live lease file with the same TTL.
  FileLocksOptions peer_options;
  peer_options.locks_dir = root_ + "/peer_locks";
  peer_options.host_id = "peer-host";
  peer_options.stale_after = kTtl;
  peer_options.poll_interval = absl::Milliseconds(100);
  peer_options.entry_dir = [this](const EntryKey& id) {
    return absl::StrCat(root_, "/neff/", RecordsRelDir(id.key()));
  };
  std::unique_ptr<ExternalLocks> peer = NewFileLocks(peer_options);
  const EntryKey live_id = *EntryKey::Parse("neff", kVersion, "live");

  absl::Duration slowest_lookup, slowest_stats;
  int fresh = 0;
  const absl::Time until = absl::Now() + 3 * kTtl;
  while (absl::Now() < until) {
    EXPECT_EQ(peer->TryTake(live_id, "peer-lease"), nullptr)
        << "a peer broke this host's live lease";
    v1::LookupResponse::Result result;
    slowest_lookup =
        std::max(slowest_lookup, TimedLookup(*cache_, "served", &result));
    EXPECT_EQ(result, v1::LookupResponse::HIT);
    v1::Stats stats;
    grpc::ClientContext context;
    const absl::Time start = absl::Now();
    EXPECT_TRUE(cache_->GetStats(&context, v1::GetStatsRequest(), &stats).ok());
    slowest_stats = std::max(slowest_stats, absl::Now() - start);
    EXPECT_TRUE(Publish(absl::StrCat("fresh", fresh++)).ok());
    absl::SleepFor(absl::Milliseconds(100));
  }
  // Every call above returned while the stall was in force (a call that
  // waited on it would still be waiting): that is the behaviour. How long
  // they took is a figure, printed, not a bound (issue 29).
  std::printf(
      "with one key stalled for %.1f s: %d other keys published, slowest "
      "lookup %.1f ms, slowest GetStats %.1f ms, live lease kept\n",
      absl::ToDoubleSeconds(3 * kTtl), fresh,
      absl::ToDoubleMilliseconds(slowest_lookup),
      absl::ToDoubleMilliseconds(slowest_stats));

  stop = true;
  holder.join();
  env_.Release();
  env_.Clear();
  for (std::thread& t : stuck) t.join();
}

}  // namespace
}  // namespace neffd
