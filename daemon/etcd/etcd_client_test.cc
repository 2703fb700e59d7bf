// EtcdClient against a real etcd (Debian's etcd-server) on loopback: the
// create-if-absent a cross-host lease is built on, watches that see a
// change made before they started, revocation waking a watcher, and the
// errors of an etcd that is gone.
#include "daemon/etcd/etcd_client.h"

#include <thread>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/harness/etcd_server.h"
#include "tests/harness/temp_dir.h"
#include "tests/harness/tls.h"

namespace neffd::etcd {
namespace {

class EtcdClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<test_support::EtcdServer>> started =
        test_support::EtcdServer::Start(test_support::TestTempDir("etcd_") +
                                        "/data");
    ASSERT_TRUE(started.ok()) << started.status();
    server_ = *std::move(started);
    a_ = Client(server_->endpoint());
    b_ = Client(server_->endpoint());
  }

  static std::unique_ptr<EtcdClient> Client(const std::string& endpoints) {
    EtcdOptions options;
    options.endpoints = endpoints;
    options.call_timeout = absl::Seconds(5);
    return *EtcdClient::Connect(options);
  }

  std::unique_ptr<test_support::EtcdServer> server_;
  std::unique_ptr<EtcdClient> a_, b_;
};

TEST_F(EtcdClientTest, AKeyCreatedUnderALeaseHasOneHolderUntilTheLeaseEnds) {
  const std::string key = "/neffd/test/lease/neff/2.19/k1";
  absl::StatusOr<int64_t> lease_a = a_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease_a.ok()) << lease_a.status();
  absl::StatusOr<CreateResult> first =
      a_->CreateIfAbsent(key, "host-a", *lease_a);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(first->created);
  ASSERT_TRUE(a_->KeepAlive(*lease_a).ok());

  absl::StatusOr<int64_t> lease_b = b_->GrantLease(absl::Seconds(30));
  ASSERT_TRUE(lease_b.ok()) << lease_b.status();
  absl::StatusOr<CreateResult> second =
      b_->CreateIfAbsent(key, "host-b", *lease_b);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE(second->created);
  ASSERT_TRUE(second->existing.has_value());
  EXPECT_EQ(second->existing->value, "host-a");
  EXPECT_EQ(second->existing->lease, *lease_a);

  // b waits for the key; a's holder ends its lease (a release, or a dead
  // daemon's lease expiring): the key goes and b is woken by it.
  absl::StatusOr<Change> change;
  std::thread waiter([&] {
    change = b_->WaitForChange(key, second->revision + 1, absl::Seconds(30));
  });
  ASSERT_TRUE(a_->RevokeLease(*lease_a).ok());
  waiter.join();
  ASSERT_TRUE(change.ok()) << change.status();
  EXPECT_EQ(change->kind, Change::kDelete);
  EXPECT_TRUE(absl::IsNotFound(a_->KeepAlive(*lease_a)));

  absl::StatusOr<CreateResult> taken =
      b_->CreateIfAbsent(key, "host-b", *lease_b);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_TRUE(taken->created);
}

TEST_F(EtcdClientTest, AWatchFromAReadsRevisionSeesAChangeMadeBeforeIt) {
  const std::string key = "/neffd/test/published/k2";
  int64_t revision = 0;
  absl::StatusOr<std::optional<KeyState>> read = b_->Get(key, &revision);
  ASSERT_TRUE(read.ok()) << read.status();
  EXPECT_FALSE(read->has_value());
  ASSERT_TRUE(a_->Put(key, "sha256:abc").ok());  // before b watches
  absl::StatusOr<Change> change =
      b_->WaitForChange(key, revision + 1, absl::Seconds(30));
  ASSERT_TRUE(change.ok()) << change.status();
  EXPECT_EQ(change->kind, Change::kPut);
  EXPECT_EQ(change->value, "sha256:abc");
  EXPECT_GT(change->revision, revision);
  absl::StatusOr<bool> deleted = a_->Delete(key);
  ASSERT_TRUE(deleted.ok());
  EXPECT_TRUE(*deleted);
  EXPECT_FALSE(*a_->Delete(key));
}

TEST_F(EtcdClientTest, AWatchWithoutAChangeEndsAtItsDeadline) {
  int64_t revision = 0;
  ASSERT_TRUE(a_->Get("/neffd/test/quiet", &revision).ok());
  absl::StatusOr<Change> change = a_->WaitForChange(
      "/neffd/test/quiet", revision + 1, absl::Milliseconds(300));
  EXPECT_EQ(change.status().code(), absl::StatusCode::kDeadlineExceeded)
      << change.status();
}

TEST_F(EtcdClientTest, AnEtcdThatIsGoneIsAnErrorNamingIt) {
  server_->Kill();
  EtcdOptions options;
  options.endpoints = server_->endpoint();
  options.call_timeout = absl::Milliseconds(500);
  std::unique_ptr<EtcdClient> client = *EtcdClient::Connect(options);
  absl::StatusOr<int64_t> lease = client->GrantLease(absl::Seconds(10));
  ASSERT_FALSE(lease.ok());
  EXPECT_TRUE(lease.status().code() == absl::StatusCode::kUnavailable ||
              lease.status().code() == absl::StatusCode::kDeadlineExceeded)
      << lease.status();
  EXPECT_TRUE(absl::StrContains(lease.status().message(), server_->endpoint()))
      << lease.status();
}

TEST_F(EtcdClientTest, APrefixWatchSeesEveryDeleteUnderItInOrder) {
  ASSERT_TRUE(a_->Put("/neffd/test/p/k1", "v1").ok());
  ASSERT_TRUE(a_->Put("/neffd/test/p/k2", "v2").ok());
  ASSERT_TRUE(a_->Put("/neffd/test/q/k3", "v3").ok());
  absl::StatusOr<std::vector<std::pair<std::string, KeyState>>> listed =
      a_->List("/neffd/test/p/");
  ASSERT_TRUE(listed.ok()) << listed.status();
  ASSERT_EQ(listed->size(), 2u);
  EXPECT_EQ((*listed)[0].first, "/neffd/test/p/k1");
  std::unique_ptr<PrefixWatch> watch =
      b_->WatchPrefix("/neffd/test/p/", 0, /*deletes_only=*/true);
  std::vector<Change> seen;
  absl::Notification ready;
  absl::Status ended;
  std::thread watcher([&] {
    int64_t next = 0;
    ended = watch->Run([&](int64_t) { ready.Notify(); },
                       [&](const Change& c) {
                         seen.push_back(c);
                         if (seen.size() == 2) watch->Cancel();
                       },
                       &next);
  });
  ready.WaitForNotification();
  // Only the incarnation created at its create_revision is deleted.
  ASSERT_FALSE(*a_->DeleteIfCreatedAt("/neffd/test/p/k1", 1));
  ASSERT_TRUE(*a_->DeleteIfCreatedAt("/neffd/test/p/k1",
                                     (*listed)[0].second.create_revision));
  ASSERT_TRUE(*a_->Delete("/neffd/test/q/k3"));          // not under the prefix
  ASSERT_TRUE(a_->Put("/neffd/test/p/k2", "v2b").ok());  // a put: filtered
  ASSERT_TRUE(*a_->Delete("/neffd/test/p/k2"));
  watcher.join();
  EXPECT_TRUE(absl::IsCancelled(ended)) << ended;
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].key, "/neffd/test/p/k1");
  EXPECT_EQ(seen[0].kind, Change::kDelete);
  EXPECT_EQ(seen[1].key, "/neffd/test/p/k2");
  EXPECT_LT(seen[0].revision, seen[1].revision);
}

// etcd serving mutual TLS: the CA's client certificate is let in, a
// client without one, with a self-signed one, or in plaintext is not.
TEST(EtcdTlsTest, OnlyAClientWithTheCasCertificateIsServed) {
  const std::string certs = test_support::TestTempDir("etcd_tls_");
  test_support::MakeTestCertificates(certs);
  absl::StatusOr<std::unique_ptr<test_support::EtcdServer>> server =
      test_support::EtcdServer::Start(certs + "/data", 1, {}, certs);
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = [&](const std::string& cert) {
    EtcdOptions options;
    options.endpoints = (*server)->endpoint();
    options.call_timeout = absl::Seconds(3);
    options.ca = certs + "/ca.pem";
    if (!cert.empty()) {
      options.cert = certs + "/" + cert + ".pem";
      options.key = certs + "/" + cert + ".key";
    }
    return *EtcdClient::Connect(options);
  };
  absl::Status put = client("client")->Put("/neffd/test/tls", "in");
  EXPECT_TRUE(put.ok()) << put;
  EXPECT_FALSE(client("")->Put("/neffd/test/tls", "no cert").ok());
  EXPECT_FALSE(client("rogue")->Put("/neffd/test/tls", "rogue").ok());
  EtcdOptions plain;
  plain.endpoints = (*server)->endpoint();
  plain.call_timeout = absl::Seconds(3);
  EXPECT_FALSE((*EtcdClient::Connect(plain))->Put("/neffd/test/tls", "x").ok());
  absl::StatusOr<std::optional<KeyState>> got =
      client("client")->Get("/neffd/test/tls");
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got->has_value());
  EXPECT_EQ((*got)->value, "in");
}

TEST(EtcdOptionsTest, BadOptionsAreInvalidArguments) {
  EtcdOptions none;
  EXPECT_TRUE(absl::IsInvalidArgument(EtcdClient::Connect(none).status()));
  EtcdOptions half;
  half.endpoints = "127.0.0.1:2379";
  half.cert = "/etc/hostname";
  EXPECT_TRUE(absl::IsInvalidArgument(EtcdClient::Connect(half).status()));
  EtcdOptions unreadable;
  unreadable.endpoints = "127.0.0.1:2379";
  unreadable.ca = "/nonexistent/ca.pem";
  absl::Status status = EtcdClient::Connect(unreadable).status();
  EXPECT_TRUE(absl::IsInvalidArgument(status));
  EXPECT_TRUE(absl::StrContains(status.message(), "/nonexistent/ca.pem"));
}

}  // namespace
}  // namespace neffd::etcd
