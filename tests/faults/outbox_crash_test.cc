// The S3 outbox across a crash (docs/REMOTE.md, "Write-behind, durable"): a
// test build of neffd (neffd_crash_points) publishes with --remote in rw
// mode and SIGKILLs itself at one step of the publish; the plain daemon
// restarts on the same directories against the same real s3rver. An entry
// the crash left whole on the shared store is uploaded after the restart
// (model.neff, then model.done); one it left unfinished is never uploaded
// in part, its row waits, and the key's next publish uploads it. A publish
// the daemon refused leaves no row and sends nothing, before or after a
// restart.
#include <signal.h>

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "tests/harness/process.h"
#include "tests/harness/remote_env.h"
#include "tests/harness/servers.h"
#include "tests/harness/temp_dir.h"

namespace neffd::test_support {
namespace {

// Where in the server's log the first answered `method` of an object whose
// path ends in `suffix` is; -1 if none.
int RequestAt(const LoopbackServer& server, const std::string& method,
              const std::string& suffix) {
  const std::vector<std::string> log = server.RequestLog();
  for (size_t i = 0; i < log.size(); ++i) {
    if (absl::StartsWith(log[i], method + " ") &&
        absl::StrContains(log[i], suffix + " 200")) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

int RequestsNaming(const LoopbackServer& server, const std::string& text) {
  const std::vector<std::string> log = server.RequestLog();
  return std::count_if(log.begin(), log.end(), [&](const std::string& line) {
    return absl::StrContains(line, text);
  });
}

class OutboxCrashTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    root_ = NewTempDir("outbox_crash");
    absl::StatusOr<std::unique_ptr<LoopbackServer>> s3 =
        StartS3Server(root_ + "/s3", kRemoteBucket);
    ASSERT_TRUE(s3.ok()) << s3.status();
    s3_ = *std::move(s3);
  }

  std::vector<std::string> Flags() const {
    std::vector<std::string> flags = RemoteFlags(*s3_);
    flags.push_back("--lease_ttl=3");
    flags.push_back("--v=info");  // upload_deferred, remote_tier_started
    return flags;
  }

  // The entry's objects in S3: the artifact is `bytes`, model.done was
  // written after it.
  void ExpectInS3(const std::string& key, const std::string& bytes) {
    S3TestClient s3(*s3_);
    absl::StatusOr<std::string> neff = s3.Get(ObjectName(key, "model.neff"));
    ASSERT_TRUE(neff.ok()) << neff.status();
    EXPECT_TRUE(*neff == bytes) << "S3's model.neff differs";
    EXPECT_TRUE(s3.Get(ObjectName(key, "model.done")).ok());
    const int artifact = RequestAt(*s3_, "PUT", ObjectName(key, "model.neff"));
    const int done = RequestAt(*s3_, "PUT", ObjectName(key, "model.done"));
    EXPECT_GE(artifact, 0);
    EXPECT_GT(done, artifact) << "model.done must be the last object";
  }

  std::string root_;
  std::unique_ptr<LoopbackServer> s3_;
};

TEST_P(OutboxCrashTest, EveryEntryPublishedBeforeTheCrashIsUploaded) {
  const std::string point = GetParam();
  // Past the artifact's verification the upload intent is durable, and
  // past its rename the entry is whole on the store.
  const bool committed = point != "temp_written";
  std::vector<std::string> env = S3Env();
  env.push_back("NEFFD_TEST_CRASH_AT=" + point);
  DaemonProcess crashing(root_, Flags(), env);
  crashing.set_binary("tests/faults/neffd_crash_points");
  ASSERT_TRUE(crashing.Start()) << crashing.process().Stderr();
  const std::string bytes = NeffBytes("k");
  EXPECT_FALSE(PublishInline(*crashing.NewStub(), NeffId("k"), bytes).ok())
      << "the client heard PUBLISHED";
  EXPECT_EQ(crashing.Wait(), 128 + SIGKILL);
  ASSERT_TRUE(absl::StrContains(crashing.process().Stderr(),
                                "crash_point name=" + point))
      << crashing.process().Stderr();
  ASSERT_EQ(CountWrites(*s3_), 0) << "uploaded before the crash";

  DaemonProcess restarted(crashing);
  restarted.set_binary("daemon/neffd");
  ASSERT_TRUE(restarted.Start()) << restarted.process().Stderr();
  if (committed) {
    ASSERT_EQ(UploadedAll(restarted, *s3_, 1), absl::OkStatus())
        << restarted.process().Stderr();
    ExpectInS3("k", bytes);
    return;
  }
  // Nothing of the entry reached the store: its row waits for it, and
  // nothing is sent meanwhile.
  EXPECT_EQ(StatsOf(restarted).upload_queue(), 1u);
  ASSERT_TRUE(WaitUntil(
      [&] {
        return absl::StrContains(restarted.process().Stderr(),
                                 "upload_deferred");
      },
      absl::Seconds(30)))
      << restarted.process().Stderr();
  EXPECT_EQ(CountWrites(*s3_), 0) << absl::StrJoin(s3_->RequestLog(), "\n");
  EXPECT_EQ(StatsOf(restarted).upload_queue(), 1u);
  // The rank publishes again (its client retries): that entry goes up.
  const std::string again = NeffBytes("k", 200 * 1024 + 1);
  ASSERT_TRUE(PublishInline(*restarted.NewStub(), NeffId("k"), again).ok())
      << restarted.process().Stderr();
  ASSERT_EQ(UploadedAll(restarted, *s3_, 1), absl::OkStatus())
      << restarted.process().Stderr();
  ExpectInS3("k", again);
}

INSTANTIATE_TEST_SUITE_P(
    Points, OutboxCrashTest,
    // The bytes verified, the upload intent durable, nothing of the entry
    // under its final names; model.done renamed in (the commit);
    // the entry durable with the rank not yet answered, where the daemon
    // used to queue the upload.
    ::testing::Values("temp_written", "done_renamed", "published"),
    [](const ::testing::TestParamInfo<std::string>& info) {
      return info.param;
    });

// Publishes `bytes` under `lease` claiming `sha256`.
grpc::Status PublishClaiming(const DaemonProcess& daemon,
                             const v1::Lease& lease, const std::string& bytes,
                             const std::string& sha256) {
  v1::PublishRequest request;
  request.set_lease_id(lease.lease_id());
  *request.mutable_id() = lease.id();
  request.set_inline_bytes(bytes);
  request.set_size(bytes.size());
  request.set_sha256(sha256);
  v1::PublishResponse response;
  grpc::ClientContext context;
  return daemon.NewStub()->Publish(&context, request, &response);
}

using RefusedPublishTest = OutboxCrashTest;

TEST_F(RefusedPublishTest, LeavesNoRowAndUploadsNothing) {
  DaemonProcess daemon(root_, Flags(), S3Env());
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  const v1::LockResponse granted = LockKey(daemon, NeffId("refused"));
  ASSERT_EQ(granted.outcome(), v1::LockResponse::GRANTED)
      << granted.ShortDebugString();
  const std::string bytes = NeffBytes("refused");
  // The bytes fail verification against the claimed sha256.
  grpc::Status wrong_hash =
      PublishClaiming(daemon, granted.lease(), bytes, Sha256Hex(bytes + "x"));
  EXPECT_EQ(wrong_hash.error_code(), grpc::StatusCode::INVALID_ARGUMENT)
      << wrong_hash.error_message();
  EXPECT_EQ(StatsOf(daemon).upload_queue(), 0u);
  // A publish under a lease nobody holds.
  v1::Lease forged = granted.lease();
  forged.set_lease_id("forged");
  grpc::Status no_lease =
      PublishClaiming(daemon, forged, bytes, Sha256Hex(bytes));
  EXPECT_FALSE(no_lease.ok());
  EXPECT_EQ(StatsOf(daemon).upload_queue(), 0u);

  // An entry published after them is uploaded; nothing of the refused one.
  ASSERT_TRUE(
      PublishInline(*daemon.NewStub(), NeffId("good"), NeffBytes("good")).ok());
  ASSERT_EQ(UploadedAll(daemon, *s3_, 1), absl::OkStatus())
      << daemon.process().Stderr();
  ExpectInS3("good", NeffBytes("good"));
  EXPECT_EQ(RequestsNaming(*s3_, ObjectName("refused", "model.neff") + " "), 0)
      << absl::StrJoin(s3_->RequestLog(), "\n");
  EXPECT_EQ(CountWrites(*s3_), 2) << absl::StrJoin(s3_->RequestLog(), "\n");

  // No row lingers on disk either: a restart loads none.
  daemon.Signal(SIGKILL);
  daemon.Wait();
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  const v1::Stats stats = StatsOf(daemon);
  EXPECT_EQ(stats.remote_mode(), "rw");
  EXPECT_EQ(stats.upload_queue(), 0u);
  EXPECT_TRUE(
      absl::StrContains(daemon.process().Stderr(), "remote_tier_started"));
  EXPECT_TRUE(absl::StrContains(daemon.process().Stderr(), "queued_uploads=0"))
      << daemon.process().Stderr();
}

}  // namespace
}  // namespace neffd::test_support
