// CompileCache and CacheAdmin as a client sees them, against a real Daemon
// started in this process on temp dirs and a real unix socket (real
// RocksDB, real store): the Lookup / Lock / Publish / Unlock path, a parked
// waiter, and the admin queries ListEntries (with paging), ShowEntry and
// GetLocks.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/runtime/daemon.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "store/digest.h"
#include "store/entry_id.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

constexpr char kVersion[] = "2.19.1";

v1::EntryId Neff(const std::string& key) {
  return EntryKey::Parse("neff", kVersion, key)->ToProto();
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class ServiceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string root = test_support::TestTempDir("service_");
    // A unix socket path has at most 107 bytes; TEST_TMPDIR is long.
    char socket_dir[] = "/tmp/neffd-service-test.XXXXXX";
    ASSERT_NE(mkdtemp(socket_dir), nullptr);
    socket_dir_ = socket_dir;
    DaemonOptions options;
    options.address = absl::StrCat("unix:", socket_dir_, "/neffd.sock");
    options.admin_address = absl::StrCat("unix:", socket_dir_, "/admin.sock");
    options.neff_cache_dir = root + "/neff";
    options.hlo_cache_dir = root + "/hlo";
    options.local_dir = root + "/local";
    options.host_id = "service-test";
    absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(options);
    ASSERT_TRUE(daemon.ok()) << daemon.status();
    daemon_ = *std::move(daemon);
    auto channel = grpc::CreateChannel(options.address,
                                       grpc::InsecureChannelCredentials());
    cache_ = v1::CompileCache::NewStub(channel);
    admin_ = v1::CacheAdmin::NewStub(channel);
  }

  void TearDown() override {
    if (daemon_ != nullptr) daemon_->Shutdown();
    daemon_.reset();
    rmdir(socket_dir_.c_str());
  }

  v1::LookupResponse Lookup(const std::string& key,
                            grpc::Status* status = nullptr) {
    v1::LookupRequest request;
    *request.mutable_id() = Neff(key);
    v1::LookupResponse response;
    grpc::ClientContext context;
    grpc::Status s = cache_->Lookup(&context, request, &response);
    if (status != nullptr) *status = s;
    EXPECT_TRUE(status != nullptr || s.ok()) << s.error_message();
    return response;
  }

  v1::LockResponse Lock(const std::string& key, bool wait,
                        uint32_t wait_seconds = 0, int64_t pid = getpid()) {
    v1::LockRequest request;
    *request.mutable_id() = Neff(key);
    request.mutable_holder()->set_host("service-test");
    request.mutable_holder()->set_pid(pid);
    request.mutable_holder()->set_rank(7);
    request.set_wait(wait);
    request.set_wait_seconds(wait_seconds);
    v1::LockResponse response;
    grpc::ClientContext context;
    grpc::Status status = cache_->Lock(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  grpc::Status Publish(const v1::Lease& lease, const std::string& bytes,
                       v1::PublishResponse* response) {
    v1::PublishRequest request;
    request.set_lease_id(lease.lease_id());
    *request.mutable_id() = lease.id();
    request.set_inline_bytes(bytes);
    request.set_size(bytes.size());
    request.set_sha256(Sha256Hex(bytes));
    grpc::ClientContext context;
    return cache_->Publish(&context, request, response);
  }

  grpc::Status Unlock(const v1::Lease& lease,
                      v1::UnlockRequest::Outcome outcome,
                      const std::string& log = "") {
    v1::UnlockRequest request;
    request.set_lease_id(lease.lease_id());
    *request.mutable_id() = lease.id();
    request.set_outcome(outcome);
    request.set_log(log);
    v1::UnlockResponse response;
    grpc::ClientContext context;
    return cache_->Unlock(&context, request, &response);
  }

  // Locks `key` and publishes `bytes` under it.
  void Put(const std::string& key, const std::string& bytes) {
    v1::LockResponse lock = Lock(key, /*wait=*/true);
    ASSERT_EQ(lock.outcome(), v1::LockResponse::GRANTED);
    v1::PublishResponse published;
    grpc::Status status = Publish(lock.lease(), bytes, &published);
    ASSERT_TRUE(status.ok()) << status.error_message();
    ASSERT_EQ(published.outcome(), v1::PublishResponse::PUBLISHED);
  }

  v1::LocksResponse GetLocks() {
    v1::LocksResponse response;
    grpc::ClientContext context;
    grpc::Status status =
        admin_->GetLocks(&context, v1::GetLocksRequest(), &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return response;
  }

  grpc::Status ShowEntry(const v1::EntryId& id, v1::EntryInfo* info) {
    v1::ShowEntryRequest request;
    *request.mutable_id() = id;
    grpc::ClientContext context;
    return admin_->ShowEntry(&context, request, info);
  }

  grpc::Status ListEntries(const v1::ListEntriesRequest& request,
                           v1::ListEntriesResponse* response) {
    grpc::ClientContext context;
    return admin_->ListEntries(&context, request, response);
  }

  std::string socket_dir_;
  std::unique_ptr<Daemon> daemon_;
  std::unique_ptr<v1::CompileCache::Stub> cache_;
  std::unique_ptr<v1::CacheAdmin::Stub> admin_;
};

TEST_F(ServiceTest, MissLockPublishThenHitWithTheSameBytes) {
  EXPECT_EQ(Lookup("k1").result(), v1::LookupResponse::MISS);

  v1::LockResponse lock = Lock("k1", /*wait=*/true);
  ASSERT_EQ(lock.outcome(), v1::LockResponse::GRANTED);
  EXPECT_FALSE(lock.lease().lease_id().empty());
  EXPECT_GT(lock.lease().ttl_ms(), 0);
  struct stat st;
  EXPECT_EQ(stat(lock.lease().staging_dir().c_str(), &st), 0);

  v1::PublishResponse published;
  grpc::Status status = Publish(lock.lease(), "neff bytes", &published);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(published.outcome(), v1::PublishResponse::PUBLISHED);

  v1::LookupResponse hit = Lookup("k1");
  ASSERT_EQ(hit.result(), v1::LookupResponse::HIT);
  EXPECT_EQ(ReadAll(hit.entry().path()), "neff bytes");
  EXPECT_EQ(hit.entry().size(), 10u);

  // The entry exists now: a lock is answered READY, no lease is out.
  EXPECT_EQ(Lock("k1", /*wait=*/false).outcome(), v1::LockResponse::READY);
  EXPECT_EQ(GetLocks().leases_size(), 0);
}

TEST_F(ServiceTest, ASecondLockWithoutWaitIsBusyWhileTheKeyIsHeld) {
  v1::LockResponse first = Lock("k1", /*wait=*/true);
  ASSERT_EQ(first.outcome(), v1::LockResponse::GRANTED);
  EXPECT_EQ(Lock("k1", /*wait=*/false, 0, getpid() + 1).outcome(),
            v1::LockResponse::BUSY);
}

TEST_F(ServiceTest, AbandonedLeaseLeavesAMissAndTheKeyLockable) {
  v1::LockResponse lock = Lock("k1", /*wait=*/true);
  ASSERT_EQ(lock.outcome(), v1::LockResponse::GRANTED);
  grpc::Status status = Unlock(lock.lease(), v1::UnlockRequest::ABANDONED);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(Lookup("k1").result(), v1::LookupResponse::MISS);
  EXPECT_EQ(GetLocks().leases_size(), 0);
  EXPECT_EQ(Lock("k1", /*wait=*/true).outcome(), v1::LockResponse::GRANTED);
}

TEST_F(ServiceTest, RecordedFailureIsServedToLookupsAndShownWithItsLog) {
  v1::LockResponse lock = Lock("k1", /*wait=*/true);
  ASSERT_EQ(lock.outcome(), v1::LockResponse::GRANTED);
  grpc::Status status =
      Unlock(lock.lease(), v1::UnlockRequest::FAILED, "error: bad graph");
  ASSERT_TRUE(status.ok()) << status.error_message();

  EXPECT_EQ(Lookup("k1").result(), v1::LookupResponse::FAILED);
  EXPECT_EQ(Lock("k1", /*wait=*/false).outcome(), v1::LockResponse::FAILED);
  v1::EntryInfo info;
  status = ShowEntry(Neff("k1"), &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(info.cached());
  ASSERT_TRUE(info.has_failure());
  EXPECT_TRUE(absl::StrContains(info.failure().log(), "bad graph"))
      << info.failure().log();
}

TEST_F(ServiceTest, PublishWithAForeignLeaseIsRefusedAndNothingIsServed) {
  v1::LockResponse lock = Lock("k1", /*wait=*/true);
  ASSERT_EQ(lock.outcome(), v1::LockResponse::GRANTED);
  v1::Lease forged = lock.lease();
  forged.set_lease_id("not-a-lease");
  v1::PublishResponse published;
  grpc::Status status = Publish(forged, "bytes", &published);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.error_code(), grpc::StatusCode::INTERNAL)
      << status.error_message();
  EXPECT_EQ(Lookup("k1").result(), v1::LookupResponse::MISS);
}

TEST_F(ServiceTest, InvalidRequestsAreRefusedNamingTheField) {
  v1::LookupRequest lookup;
  *lookup.mutable_id() = Neff("k1");
  lookup.mutable_id()->set_key("");
  v1::LookupResponse response;
  grpc::ClientContext context;
  grpc::Status status = cache_->Lookup(&context, lookup, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StartsWith(status.error_message(), "id.key:"))
      << status.error_message();

  v1::LockResponse lock = Lock("k1", /*wait=*/true);
  ASSERT_EQ(lock.outcome(), v1::LockResponse::GRANTED);
  v1::PublishRequest publish;
  publish.set_lease_id(lock.lease().lease_id());
  *publish.mutable_id() = lock.lease().id();
  publish.set_inline_bytes("abc");
  publish.set_size(3);
  publish.set_sha256("not hex");
  v1::PublishResponse published;
  grpc::ClientContext publish_context;
  status = cache_->Publish(&publish_context, publish, &published);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StartsWith(status.error_message(), "sha256:"))
      << status.error_message();
}

TEST_F(ServiceTest, AParkedWaiterShowsInGetLocksAndIsToldReadyOnPublish) {
  v1::LockResponse holder = Lock("k1", /*wait=*/true);
  ASSERT_EQ(holder.outcome(), v1::LockResponse::GRANTED);

  v1::LockResponse waited;
  std::thread waiter([&] {
    waited = Lock("k1", /*wait=*/true, /*wait_seconds=*/60, getpid() + 1);
  });
  // Parked: the daemon reports the waiter on the holder's lease.
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  v1::LocksResponse locks;
  do {
    locks = GetLocks();
    if (locks.waiters() == 1) break;
    absl::SleepFor(absl::Milliseconds(10));
  } while (absl::Now() < deadline);
  ASSERT_EQ(locks.waiters(), 1u);
  ASSERT_EQ(locks.leases_size(), 1);
  const v1::LeaseInfo& lease = locks.leases(0);
  EXPECT_EQ(lease.id().key(), "k1");
  EXPECT_EQ(lease.holder().host(), "service-test");
  EXPECT_EQ(lease.holder().pid(), getpid());
  EXPECT_EQ(lease.holder().rank(), 7);
  EXPECT_EQ(lease.waiters(), 1u);
  EXPECT_FALSE(lease.publishing());
  EXPECT_GT(lease.expires_in_ms(), 0);
  EXPECT_FALSE(locks.draining());

  v1::PublishResponse published;
  grpc::Status status = Publish(holder.lease(), "bytes", &published);
  ASSERT_TRUE(status.ok()) << status.error_message();
  waiter.join();
  EXPECT_EQ(waited.outcome(), v1::LockResponse::READY);
  EXPECT_EQ(ReadAll(waited.entry().path()), "bytes");
  EXPECT_EQ(GetLocks().waiters(), 0u);
}

TEST_F(ServiceTest, ShowEntryReportsCachedLockedAndMissingEntries) {
  Put("cached", "twelve bytes");
  v1::EntryInfo info;
  grpc::Status status = ShowEntry(Neff("cached"), &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_TRUE(info.cached());
  EXPECT_EQ(info.entry().size(), 12u);
  EXPECT_FALSE(info.locked());
  EXPECT_EQ(info.id().key(), "cached");

  ASSERT_EQ(Lock("compiling", /*wait=*/true).outcome(),
            v1::LockResponse::GRANTED);
  info.Clear();
  status = ShowEntry(Neff("compiling"), &info);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_FALSE(info.cached());
  EXPECT_TRUE(info.locked());
  EXPECT_EQ(info.lease().holder().pid(), getpid());

  info.Clear();
  status = ShowEntry(Neff("absent"), &info);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_TRUE(absl::StrContains(status.error_message(), "absent"))
      << status.error_message();

  v1::EntryId bad = Neff("k1");
  bad.set_key("bad/key");
  status = ShowEntry(bad, &info);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(ServiceTest, ListEntriesPagesThroughEveryEntryOnceInKeyOrder) {
  const std::vector<std::string> keys = {"a", "b", "c", "d", "e"};
  for (const std::string& key : keys) Put(key, "bytes of " + key);

  std::vector<std::string> listed;
  v1::ListEntriesRequest request;
  request.set_page_size(2);
  int pages = 0;
  do {
    v1::ListEntriesResponse page;
    grpc::Status status = ListEntries(request, &page);
    ASSERT_TRUE(status.ok()) << status.error_message();
    EXPECT_EQ(page.total(), keys.size());
    EXPECT_LE(page.entries_size(), 2);
    for (const v1::EntryInfo& info : page.entries()) {
      listed.push_back(info.id().key());
      EXPECT_TRUE(info.cached());
      EXPECT_EQ(info.entry().size(), 10u);
    }
    request.set_page_token(page.next_page_token());
    ASSERT_LT(++pages, 10) << "paging does not end";
  } while (!request.page_token().empty());
  EXPECT_EQ(listed, keys);
}

TEST_F(ServiceTest, ListEntriesFiltersSortsAndLimits) {
  Put("small", "1");
  Put("large", "1234567");
  Put("medium", "1234");

  v1::ListEntriesRequest request;
  request.set_sort_by(v1::ListEntriesRequest::SIZE);
  request.set_limit(2);
  v1::ListEntriesResponse response;
  grpc::Status status = ListEntries(request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.total(), 3u);
  ASSERT_EQ(response.entries_size(), 2);
  EXPECT_EQ(response.entries(0).id().key(), "large");
  EXPECT_EQ(response.entries(1).id().key(), "medium");

  request.Clear();
  request.set_namespace_("hlo");
  response.Clear();
  ASSERT_TRUE(ListEntries(request, &response).ok());
  EXPECT_EQ(response.entries_size(), 0);

  request.Clear();
  request.set_compiler_version("9.9.9");
  response.Clear();
  ASSERT_TRUE(ListEntries(request, &response).ok());
  EXPECT_EQ(response.entries_size(), 0);

  ASSERT_EQ(Lock("compiling", /*wait=*/true).outcome(),
            v1::LockResponse::GRANTED);
  request.Clear();
  request.set_locked(true);
  response.Clear();
  ASSERT_TRUE(ListEntries(request, &response).ok());
  ASSERT_EQ(response.entries_size(), 1);
  EXPECT_EQ(response.entries(0).id().key(), "compiling");
  EXPECT_TRUE(response.entries(0).locked());
  EXPECT_FALSE(response.entries(0).cached());
}

TEST_F(ServiceTest, ListEntriesRefusesABadNamespaceOrPageToken) {
  v1::ListEntriesRequest request;
  request.set_namespace_("bogus");
  v1::ListEntriesResponse response;
  grpc::Status status = ListEntries(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StartsWith(status.error_message(), "namespace"))
      << status.error_message();

  request.Clear();
  request.set_page_size(2);
  request.set_page_token("not/a canonical/key/at all");
  status = ListEntries(request, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StartsWith(status.error_message(), "page_token:"))
      << status.error_message();
}

}  // namespace
}  // namespace neffd
