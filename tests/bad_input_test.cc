// Every kind of bad request, over the wire to a real daemon: each gets its
// status and a message naming the field, nothing is created or changed outside
// the cache roots, and the daemon stays healthy.
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "tests/faults/wire.h"
#include "tests/harness/process.h"
#include "tests/harness/store_files.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

std::set<std::string> Tree(const std::string& dir) {
  std::set<std::string> paths;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    paths.insert(e.path().string());
  }
  return paths;
}

class BadInputTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = new std::string(NewTempDir("bad_input"));
    daemon_ = new DaemonProcess(*root_);
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
  }
  static void TearDownTestSuite() {
    // Still alive and serving after everything the tests sent.
    EXPECT_TRUE(daemon_->process().Running());
    delete daemon_;
  }

  void SetUp() override { stub_ = daemon_->NewStub(); }

  v1::Lease Grant(const std::string& key) { return GrantLease(*stub_, key); }

  grpc::Status Publish(const v1::PublishRequest& request) {
    v1::PublishResponse response;
    grpc::ClientContext context;
    return stub_->Publish(&context, request, &response);
  }

  static void ExpectError(const grpc::Status& status, grpc::StatusCode code,
                          const std::string& field) {
    EXPECT_EQ(status.error_code(), code) << status.error_message();
    EXPECT_TRUE(absl::StartsWith(status.error_message(), field))
        << "'" << status.error_message().substr(0, 200) << "' should name "
        << field;
    EXPECT_LE(status.error_message().size(), 1100u) << field;
  }

  static std::string* root_;
  static DaemonProcess* daemon_;
  std::unique_ptr<v1::CompileCache::Stub> stub_;
};

std::string* BadInputTest::root_ = nullptr;
DaemonProcess* BadInputTest::daemon_ = nullptr;

TEST_F(BadInputTest, MalformedIdsAreRejectedByEveryMethod) {
  struct Case {
    v1::EntryId id;
    std::string field;
  };
  const std::vector<Case> cases = {
      {Id("neff", "1.0", ""), "id.key"},
      {Id("neff", "1.0", "a/b"), "id.key"},
      {Id("neff", "1.0", ".."), "id.key"},
      {Id("neff", "1.0", "../../etc/passwd"), "id.key"},
      {Id("neff", "1.0", std::string("k\0x", 3)), "id.key"},
      {Id("neff", "1.0", std::string(129, 'a')), "id.key"},
      {Id("neff", "/abs", "k"), "id.compiler_version"},
      {Id("bogus", "1.0", "k"), "id.namespace"},
      {Id("", "1.0", "k"), "id.namespace"},
      // A megabyte of bad input is quoted only in part: the answer must
      // still fit the client's 8 KiB limit for a status.
      {Id(std::string(1 << 20, 'n'), "1.0", "k"), "id.namespace"},
      {Id("neff", std::string(1 << 20, '/'), "k"), "id.compiler_version"},
      {Id("neff", "1.0", std::string(1 << 20, 'a')), "id.key"},
  };
  const std::set<std::string> before = Tree(*root_);
  for (const Case& c : cases) {
    v1::LookupRequest lookup;
    *lookup.mutable_id() = c.id;
    v1::LookupResponse lookup_response;
    grpc::ClientContext c1;
    ExpectError(stub_->Lookup(&c1, lookup, &lookup_response),
                grpc::StatusCode::INVALID_ARGUMENT, c.field);

    v1::LockRequest lock;
    *lock.mutable_id() = c.id;
    v1::LockResponse lock_response;
    grpc::ClientContext c2;
    ExpectError(stub_->Lock(&c2, lock, &lock_response),
                grpc::StatusCode::INVALID_ARGUMENT, c.field);

    v1::PublishRequest publish;
    *publish.mutable_id() = c.id;
    publish.set_lease_id("x");
    ExpectError(Publish(publish), grpc::StatusCode::INVALID_ARGUMENT, c.field);

    v1::UnlockRequest unlock;
    *unlock.mutable_id() = c.id;
    unlock.set_lease_id("x");
    v1::UnlockResponse unlock_response;
    grpc::ClientContext c3;
    ExpectError(stub_->Unlock(&c3, unlock, &unlock_response),
                grpc::StatusCode::INVALID_ARGUMENT, c.field);
  }
  EXPECT_EQ(Tree(*root_), before);
}

TEST_F(BadInputTest, LeasesThatAreUnknownOrForeignAreRefused) {
  v1::PublishRequest publish;
  *publish.mutable_id() = Id("neff", "1.0", "lease1");
  publish.set_lease_id("00000000000000000000000000000000");
  publish.set_inline_bytes("x");
  publish.set_size(1);
  publish.set_sha256(Sha256Hex("x"));
  ExpectError(Publish(publish), grpc::StatusCode::FAILED_PRECONDITION,
              "lease_id");

  v1::Lease lease = Grant("lease2");
  *publish.mutable_id() = Id("neff", "1.0", "lease3");  // not the lease's key
  publish.set_lease_id(lease.lease_id());
  ExpectError(Publish(publish), grpc::StatusCode::FAILED_PRECONDITION,
              "lease_id");

  v1::KeepAliveRequest keep;
  v1::KeepAliveResponse kept;
  grpc::ClientContext c1;
  ExpectError(stub_->KeepAlive(&c1, keep, &kept),
              grpc::StatusCode::INVALID_ARGUMENT, "lease_id");
  keep.set_lease_id("nope");
  grpc::ClientContext c2;
  ExpectError(stub_->KeepAlive(&c2, keep, &kept),
              grpc::StatusCode::FAILED_PRECONDITION, "lease_id");

  v1::UnlockRequest unlock;
  *unlock.mutable_id() = Id("neff", "1.0", "lease2");
  unlock.set_lease_id(lease.lease_id());
  v1::UnlockResponse unlocked;
  grpc::ClientContext c3;
  ExpectError(stub_->Unlock(&c3, unlock, &unlocked),
              grpc::StatusCode::INVALID_ARGUMENT, "outcome");
  unlock.set_outcome(v1::UnlockRequest::ABANDONED);
  grpc::ClientContext c4;
  EXPECT_TRUE(stub_->Unlock(&c4, unlock, &unlocked).ok());
  grpc::ClientContext c5;  // a second unlock of the same lease
  ExpectError(stub_->Unlock(&c5, unlock, &unlocked),
              grpc::StatusCode::FAILED_PRECONDITION, "lease_id");
}

TEST_F(BadInputTest, ContentThatDoesNotMatchItsClaimIsNeverInstalled) {
  v1::Lease lease = Grant("content1");
  v1::PublishRequest publish;
  *publish.mutable_id() = lease.id();
  publish.set_lease_id(lease.lease_id());
  publish.set_inline_bytes("actual bytes");
  publish.set_size(12);
  publish.set_sha256(Sha256Hex("other bytes"));
  ExpectError(Publish(publish), grpc::StatusCode::INVALID_ARGUMENT, "sha256");
  publish.set_sha256("XYZ");
  ExpectError(Publish(publish), grpc::StatusCode::INVALID_ARGUMENT, "sha256");
  publish.set_sha256(Sha256Hex("actual bytes"));
  publish.set_size(11);
  ExpectError(Publish(publish), grpc::StatusCode::INVALID_ARGUMENT, "size");
  publish.set_size(uint64_t{1} << 50);
  ExpectError(Publish(publish), grpc::StatusCode::INVALID_ARGUMENT, "size");
  publish.clear_inline_bytes();
  publish.set_size(12);
  ExpectError(Publish(publish), grpc::StatusCode::INVALID_ARGUMENT, "content");
  const EntryFiles entry = FilesOf(*root_ + "/neff", "content1");
  EXPECT_FALSE(fs::exists(entry.artifact));
  EXPECT_FALSE(fs::exists(entry.done));

  // The lease survives bad publishes; a good one still works.
  publish.set_inline_bytes("actual bytes");
  EXPECT_TRUE(Publish(publish).ok());
  EXPECT_EQ(ReadFile(entry.artifact), "actual bytes");
}

TEST_F(BadInputTest, StagedPathsOutsideTheStagingDirOrThroughLinksAreRefused) {
  v1::Lease lease = Grant("staged1");
  const std::string staging = lease.staging_dir();
  ASSERT_EQ(staging, *root_ + "/local/staging");
  const std::string secret = *root_ + "/secret";
  WriteFile(secret, "do not publish me");
  const std::string secret_before = ReadFile(secret);
  ASSERT_EQ(symlink(secret.c_str(), (staging + "/link").c_str()), 0);
  ASSERT_EQ(link(secret.c_str(), (staging + "/hard").c_str()), 0);
  mkdir((staging + "/subdir").c_str(), 0755);
  WriteFile(staging + "/subdir/f", "x");

  struct Case {
    std::string path;
    grpc::StatusCode code;
  };
  for (const Case& c : std::vector<Case>{
           {secret, grpc::StatusCode::INVALID_ARGUMENT},
           {"/etc/passwd", grpc::StatusCode::INVALID_ARGUMENT},
           {"relative/file", grpc::StatusCode::INVALID_ARGUMENT},
           {staging + "/../../secret", grpc::StatusCode::INVALID_ARGUMENT},
           {staging + "/subdir/f", grpc::StatusCode::INVALID_ARGUMENT},
           {staging + "/", grpc::StatusCode::INVALID_ARGUMENT},
           {staging + "/link", grpc::StatusCode::FAILED_PRECONDITION},
           {staging + "/hard", grpc::StatusCode::FAILED_PRECONDITION},
           {staging + "/subdir", grpc::StatusCode::FAILED_PRECONDITION},
           {staging + "/missing", grpc::StatusCode::FAILED_PRECONDITION},
       }) {
    v1::PublishRequest publish;
    *publish.mutable_id() = lease.id();
    publish.set_lease_id(lease.lease_id());
    publish.set_staged_path(c.path);
    publish.set_size(secret_before.size());
    publish.set_sha256(Sha256Hex(secret_before));
    ExpectError(Publish(publish), c.code, "staged_path");
  }
  EXPECT_EQ(ReadFile(secret), secret_before);
  EXPECT_FALSE(fs::exists(FilesOf(*root_ + "/neff", "staged1").artifact));
  EXPECT_TRUE(fs::exists(staging + "/link"));  // refused files are not touched
}

TEST_F(BadInputTest, OversizedInlineContentIsRefused) {
  v1::Lease lease = Grant("big1");
  v1::PublishRequest publish;
  *publish.mutable_id() = lease.id();
  publish.set_lease_id(lease.lease_id());
  std::string big((16 << 20) + 1, 'b');
  publish.set_inline_bytes(big);
  publish.set_size(big.size());
  publish.set_sha256(Sha256Hex(big));
  ExpectError(Publish(publish), grpc::StatusCode::INVALID_ARGUMENT,
              "inline_bytes");
}

TEST_F(BadInputTest, DaemonIsHealthyAfterAllOfIt) {
  auto health = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      daemon_->address(), grpc::InsecureChannelCredentials()));
  grpc::health::v1::HealthCheckResponse status;
  grpc::ClientContext context;
  ASSERT_TRUE(health->Check(&context, {}, &status).ok());
  EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::SERVING);
}

}  // namespace
}  // namespace neffd::test_support
