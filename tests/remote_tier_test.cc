// The S3 tier end to end (issue 20, docs/REMOTE.md): real neffd processes in
// "clusters" (a shared store each), one real s3rver on loopback, requests
// counted from the server's own log.

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/harness/build_kind.h"
#include "tests/harness/cluster.h"
#include "tests/harness/process.h"
#include "tests/harness/remote_env.h"
#include "tests/harness/servers.h"
#include "tests/harness/store_files.h"
#include "tests/harness/temp_dir.h"

namespace neffd::test_support {
namespace {

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

std::string SharedArtifact(const Cluster& cluster, const std::string& key) {
  return FilesOf(cluster.shared_neff(), key).artifact;
}

int CountLines(const std::string& text, const std::string& needle) {
  int n = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StrContains(line, needle)) ++n;
  }
  return n;
}

// Publishes `key` on `host` as a rank does (Lock, then an inline Publish).
::testing::AssertionResult Publish(DaemonProcess& host,
                                   const std::string& key) {
  absl::Status s = PublishInline(*host.NewStub(), NeffId(key), NeffBytes(key));
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << key << ": " << s << "; daemon: " << host.process().Stderr();
}

CommandResult Neffctl(const DaemonProcess& daemon,
                      std::vector<std::string> args) {
  std::vector<std::string> argv = daemon.NeffctlArgv();
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

// The value of the sample `series` (name and labels) in a Prometheus
// exposition, or "" if it has none.
std::string Sample(const std::string& exposition, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (absl::ConsumePrefix(&line, series + " ")) return std::string(line);
  }
  return "";
}

class RemoteTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = NewTempDir("remote");
    absl::StatusOr<std::unique_ptr<LoopbackServer>> s3 =
        StartS3Server(root_ + "/s3", kRemoteBucket);
    ASSERT_TRUE(s3.ok()) << s3.status();
    s3_ = *std::move(s3);
  }

  std::string root_;
  std::unique_ptr<LoopbackServer> s3_;
};

TEST_F(RemoteTierTest, CompiledOnOneClusterIsAHitOnAnotherWithOneDownload) {
  Cluster a(root_ + "/a", RemoteFlags(*s3_));
  Cluster b(root_ + "/b", RemoteFlags(*s3_));
  for (const char* host : {"a0", "a1"}) a.AddHost(host, S3Env());
  for (const char* host : {"b0", "b1"}) b.AddHost(host, S3Env());
  const std::string bytes = NeffBytes("shared");
  ASSERT_TRUE(
      PublishInline(*a.host(0).NewStub(), NeffId("shared"), bytes).ok());
  ASSERT_EQ(UploadedAll(a.host(0), *s3_, 1), absl::OkStatus());
  ASSERT_FALSE(Exists(SharedArtifact(b, "shared")));

  // Every rank of both B hosts asks at once.
  std::vector<v1::LockResponse> answers(8);
  std::vector<std::thread> ranks;
  for (size_t i = 0; i < answers.size(); ++i) {
    ranks.emplace_back(
        [&, i] { answers[i] = LockKey(b.host(i % 2), NeffId("shared")); });
  }
  for (std::thread& t : ranks) t.join();
  for (const v1::LockResponse& answer : answers) {
    ASSERT_EQ(answer.outcome(), v1::LockResponse::READY)
        << answer.ShortDebugString();
    EXPECT_EQ(ReadFile(answer.entry().path()), bytes);
  }
  EXPECT_EQ(CountRequests(*s3_, "GET", ObjectName("shared", "model.neff")), 1);
  EXPECT_EQ(ReadFile(SharedArtifact(b, "shared")), bytes);
  EXPECT_EQ(StatsOf(b.host(0)).hits_remote() + StatsOf(b.host(1)).hits_remote(),
            1u);
  // Published on B as on A: nobody on B uploads it again.
  EXPECT_EQ(
      StatsOf(b.host(0)).upload_queue() + StatsOf(b.host(1)).upload_queue(),
      0u);
}

// Issue 27, item 3: what an unmodified TorchNeuron rank put (its artifact
// alone, renamed in) is adopted on its first lookup and uploaded like any
// entry; another cluster then gets it from S3 by its 32-hex key.
TEST_F(RemoteTierTest, AnUnmodifiedRanksEntryIsUploadedOnceAdopted) {
  Cluster a(root_ + "/a", RemoteFlags(*s3_));
  Cluster b(root_ + "/b", RemoteFlags(*s3_));
  a.AddHost("a0", S3Env());
  b.AddHost("b0", S3Env());
  const std::string key = "0123456789abcdef0123456789abcdef";
  const std::string bytes = NeffBytes(key);
  const std::string artifact = SharedArtifact(a, key);
  std::filesystem::create_directories(
      std::filesystem::path(artifact).parent_path());
  WriteFile(artifact + ".tmp", bytes);
  ASSERT_EQ(rename((artifact + ".tmp").c_str(), artifact.c_str()), 0);

  CommandResult hit = Neffctl(a.host(0), {"lookup", "neff", key});
  EXPECT_EQ(hit.exit_code, 0) << hit.out << hit.err;
  ASSERT_EQ(UploadedAll(a.host(0), *s3_, 1), absl::OkStatus());
  EXPECT_EQ(CountRequests(*s3_, "PUT", ObjectName(key, "model.neff")), 1);

  v1::EntryId any_version = NeffId(key);
  any_version.set_compiler_version("");
  const v1::LockResponse answer = LockKey(b.host(0), any_version);
  ASSERT_EQ(answer.outcome(), v1::LockResponse::READY)
      << answer.ShortDebugString();
  EXPECT_EQ(ReadFile(answer.entry().path()), bytes);
  EXPECT_EQ(ReadFile(SharedArtifact(b, key)), bytes);
  EXPECT_EQ(StatsOf(b.host(0)).hits_remote(), 1u);
}

TEST_F(RemoteTierTest, AlteredOrTruncatedObjectIsNeverServed) {
  Cluster a(root_ + "/a", RemoteFlags(*s3_));
  Cluster b(root_ + "/b", RemoteFlags(*s3_));
  a.AddHost("a0", S3Env());
  b.AddHost("b0", S3Env());
  for (const char* key : {"altered", "truncated"}) {
    ASSERT_TRUE(Publish(a.host(0), key));
  }
  ASSERT_EQ(UploadedAll(a.host(0), *s3_, 2), absl::OkStatus());
  S3TestClient s3(*s3_);
  std::string altered = NeffBytes("altered");
  altered[altered.size() / 2] ^= 0x5a;  // same size, one byte off
  ASSERT_TRUE(s3.Put(ObjectName("altered", "model.neff"), altered).ok());
  ASSERT_TRUE(s3.Put(ObjectName("truncated", "model.neff"),
                     NeffBytes("truncated").substr(0, 1000))
                  .ok());

  for (const char* key : {"altered", "truncated"}) {
    const v1::LockResponse answer = LockKey(b.host(0), NeffId(key));
    EXPECT_EQ(answer.outcome(), v1::LockResponse::GRANTED)
        << key << ": " << answer.ShortDebugString();
    EXPECT_FALSE(Exists(SharedArtifact(b, key))) << key;
  }
  const v1::Stats stats = StatsOf(b.host(0));
  EXPECT_EQ(stats.remote_corrupt(), 2u);
  EXPECT_EQ(stats.hits_remote(), 0u);
  EXPECT_EQ(CountLines(b.host(0).process().Stderr(), "remote_object_rejected"),
            2);
}

TEST_F(RemoteTierTest, DeadS3IsAMissAndQueuedUploadsFinishAfterSigkill) {
  const int port = s3_->port();
  const std::string metrics = root_ + "/c0.prom";
  std::vector<std::string> flags = RemoteFlags(*s3_);
  flags.push_back("--metrics_textfile=" + metrics);
  flags.push_back("--metrics_interval=0.2");
  Cluster c(root_ + "/c", flags);
  c.AddHost("h0", S3Env());
  s3_->Kill();

  const std::vector<std::string> keys = {"d0", "d1", "d2", "d3", "d4", "d5"};
  for (const std::string& key : keys) {
    const absl::Time start = absl::Now();
    ASSERT_TRUE(Publish(c.host(0), key)) << key;
    // Below S3's 2 s deadlines plus the publish itself.
    if (!kSanitizedBuild) {
      EXPECT_LT(absl::Now() - start, absl::Seconds(3))
          << key << "; daemon: " << c.host(0).process().Stderr();
    }
  }
  v1::Stats stats = StatsOf(c.host(0));
  // Refused at once, never waited for: no call reached its deadline.
  EXPECT_EQ(stats.remote_errors_timeout(), 0u);
  EXPECT_EQ(stats.upload_queue(), keys.size());
  EXPECT_GT(stats.remote_errors_connection_refused(), 0u);
  // Five failures in a row: S3 is skipped, and stats says so.
  EXPECT_EQ(stats.remote_breaker(), "open");
  EXPECT_GT(stats.remote_skipped(), 0u);
  // Every view names the cause: neffctl stats, its JSON and the metrics,
  // which have a series for every cause, failed or not.
  const CommandResult text = Neffctl(c.host(0), {"stats"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(absl::StrContains(text.out, "connection_refused=")) << text.out;
  EXPECT_FALSE(absl::StrContains(text.out, "access_denied=")) << text.out;
  const CommandResult json = Neffctl(c.host(0), {"--json", "stats"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(
      absl::StrContains(json.out, "\"remote_errors_connection_refused\":\""))
      << json.out;
  const std::string refused =
      "neffd_remote_errors_total{cause=\"connection_refused\"}";
  EXPECT_TRUE(WaitUntil(
      [&] {
        const std::string value = Sample(ReadFile(metrics), refused);
        return !value.empty() && value != "0";
      },
      absl::Seconds(10)))
      << ReadFile(metrics);
  for (const char* cause :
       {"access_denied", "throttled", "timeout", "server_error", "other"}) {
    const std::string series =
        absl::StrCat("neffd_remote_errors_total{cause=\"", cause, "\"}");
    EXPECT_NE(Sample(ReadFile(metrics), series), "") << series;
  }

  c.host(0).Signal(SIGKILL);
  c.host(0).Wait();
  absl::StatusOr<std::unique_ptr<LoopbackServer>> back =
      StartS3Server(root_ + "/s3", kRemoteBucket, port);
  ASSERT_TRUE(back.ok()) << back.status();
  s3_ = *std::move(back);
  ASSERT_TRUE(c.host(0).Start()) << c.host(0).process().Stderr();
  ASSERT_EQ(UploadedAll(c.host(0), *s3_, keys.size()), absl::OkStatus());
  S3TestClient s3(*s3_);
  for (const std::string& key : keys) {
    absl::StatusOr<std::string> neff = s3.Get(ObjectName(key, "model.neff"));
    ASSERT_TRUE(neff.ok()) << key << ": " << neff.status();
    EXPECT_EQ(*neff, NeffBytes(key)) << key;
    EXPECT_TRUE(s3.Get(ObjectName(key, "model.done")).ok()) << key;
  }
}

TEST_F(RemoteTierTest, AFifoPlantedInAQueuedEntryHoldsUpNoOtherUpload) {
  const int port = s3_->port();
  Cluster c(root_ + "/c", RemoteFlags(*s3_));
  c.AddHost("h0", S3Env());
  s3_->Kill();
  ASSERT_TRUE(Publish(c.host(0), "planted"));
  ASSERT_TRUE(Publish(c.host(0), "after"));
  // While both wait for S3, the first entry's artifact becomes a FIFO that
  // nobody will ever write to.
  c.host(0).Signal(SIGKILL);
  c.host(0).Wait();
  const std::string artifact = SharedArtifact(c, "planted");
  ASSERT_EQ(unlink(artifact.c_str()), 0);
  ASSERT_EQ(mkfifo(artifact.c_str(), 0644), 0);
  absl::StatusOr<std::unique_ptr<LoopbackServer>> back =
      StartS3Server(root_ + "/s3", kRemoteBucket, port);
  ASSERT_TRUE(back.ok()) << back.status();
  s3_ = *std::move(back);
  ASSERT_TRUE(c.host(0).Start()) << c.host(0).process().Stderr();

  // The damaged entry is dropped from the queue, the other one uploaded.
  ASSERT_EQ(UploadedAll(c.host(0), *s3_, 1), absl::OkStatus())
      << c.host(0).process().Stderr();
  S3TestClient s3(*s3_);
  absl::StatusOr<std::string> neff = s3.Get(ObjectName("after", "model.neff"));
  ASSERT_TRUE(neff.ok()) << neff.status();
  EXPECT_EQ(*neff, NeffBytes("after"));
  EXPECT_FALSE(s3.Get(ObjectName("planted", "model.done")).ok());
  EXPECT_EQ(CountLines(c.host(0).process().Stderr(), "upload_dropped"), 1);
}

TEST_F(RemoteTierTest, ReadOnlyModeReadsAndNeverWrites) {
  S3TestClient s3(*s3_);
  ASSERT_TRUE(s3.PutEntry("seeded", NeffBytes("seeded")).ok());
  std::vector<std::string> flags = RemoteFlags(*s3_);
  flags.push_back("--remote_mode=ro");
  Cluster c(root_ + "/ro", flags);
  c.AddHost("r0", S3Env());
  const int writes_before = CountWrites(*s3_);

  const v1::LockResponse hit = LockKey(c.host(0), NeffId("seeded"));
  ASSERT_EQ(hit.outcome(), v1::LockResponse::READY) << hit.ShortDebugString();
  EXPECT_EQ(ReadFile(hit.entry().path()), NeffBytes("seeded"));
  ASSERT_TRUE(Publish(c.host(0), "local"));
  const v1::Stats stats = StatsOf(c.host(0));
  EXPECT_EQ(stats.remote_mode(), "ro");
  EXPECT_EQ(stats.hits_remote(), 1u);
  EXPECT_EQ(stats.upload_queue(), 0u);
  // Stopped (its threads joined): whatever it would have sent is sent.
  c.host(0).Signal(SIGTERM);
  EXPECT_EQ(c.host(0).Wait(), 0);
  EXPECT_EQ(CountWrites(*s3_), writes_before);
  EXPECT_EQ(stats.remote_uploads(), 0u);
}

// Seeds one entry, then asks a daemon with `env` for it.
v1::LockResponse FetchWith(const LoopbackServer& server,
                           const std::string& root, const std::string& key,
                           std::vector<std::string> env,
                           std::string* daemon_log = nullptr) {
  Cluster c(root, RemoteFlags(server));
  c.AddHost("h0", std::move(env));
  v1::LockResponse answer = LockKey(c.host(0), NeffId(key));
  EXPECT_EQ(answer.outcome() == v1::LockResponse::READY, daemon_log == nullptr)
      << c.host(0).process().Stderr();
  if (daemon_log != nullptr) {
    for (int i = 0; i < 3; ++i) {  // more misses: still one line
      LockKey(c.host(0), NeffId(absl::StrCat(key, "-", i)));
    }
    *daemon_log = c.host(0).process().Stderr();
  }
  return answer;
}

TEST_F(RemoteTierTest, CredentialsFromEnvironmentFileAndMetadataService) {
  S3TestClient s3(*s3_);
  ASSERT_TRUE(s3.PutEntry("creds", NeffBytes("creds")).ok());

  EXPECT_EQ(FetchWith(*s3_, root_ + "/env", "creds", S3Env()).outcome(),
            v1::LockResponse::READY);

  const std::string file = root_ + "/credentials";
  WriteFile(file, absl::StrCat("[default]\naws_access_key_id = NOPE\n"
                               "aws_secret_access_key = NOPE\n\n[neffd]\n"
                               "aws_access_key_id = ",
                               kS3AccessKeyId, "\naws_secret_access_key = ",
                               kS3SecretAccessKey, "\n"));
  const std::vector<std::string> profile = {
      "AWS_EC2_METADATA_DISABLED=true", "HOME=/nonexistent",
      "AWS_SHARED_CREDENTIALS_FILE=" + file, "AWS_PROFILE=neffd"};
  EXPECT_EQ(FetchWith(*s3_, root_ + "/profile", "creds", profile).outcome(),
            v1::LockResponse::READY);

  absl::StatusOr<std::unique_ptr<LoopbackServer>> imds =
      StartImdsServer(kS3AccessKeyId, kS3SecretAccessKey, "neffd-host", 3600);
  ASSERT_TRUE(imds.ok()) << imds.status();
  std::vector<std::string> metadata = {
      "AWS_SHARED_CREDENTIALS_FILE=/nonexistent/credentials",
      "HOME=/nonexistent",
      "AWS_EC2_METADATA_SERVICE_ENDPOINT=" + (*imds)->url()};
  EXPECT_EQ(FetchWith(*s3_, root_ + "/imds", "creds", metadata).outcome(),
            v1::LockResponse::READY);
}

TEST_F(RemoteTierTest, WrongCredentialsLogOneLineAndMiss) {
  S3TestClient s3(*s3_);
  ASSERT_TRUE(s3.PutEntry("denied", NeffBytes("denied")).ok());
  std::vector<std::string> env = S3EnvWithoutKeys();
  env.push_back(absl::StrCat("AWS_ACCESS_KEY_ID=", kS3AccessKeyId));
  env.push_back("AWS_SECRET_ACCESS_KEY=not-the-secret");
  std::string log;
  EXPECT_EQ(FetchWith(*s3_, root_ + "/wrong", "denied", env, &log).outcome(),
            v1::LockResponse::GRANTED);
  EXPECT_EQ(CountLines(log, "remote_error"), 1) << log;
  EXPECT_EQ(CountLines(log, "cause=access_denied"), 1) << log;
  EXPECT_TRUE(absl::StrContains(log, "SignatureDoesNotMatch")) << log;
}

v1::LookupResponse Lookup(const DaemonProcess& daemon, const std::string& key) {
  v1::LookupRequest request;
  *request.mutable_id() = NeffId(key);
  v1::LookupResponse response;
  grpc::ClientContext context;
  (void)daemon.NewStub()->Lookup(&context, request, &response);
  return response;
}

TEST_F(RemoteTierTest, WarmPullsAManifestAndEveryViewShowsTheTiers) {
  Cluster a(root_ + "/a", RemoteFlags(*s3_));
  a.AddHost("a0", S3Env());
  for (const char* key : {"w0", "w1"}) {
    ASSERT_TRUE(Publish(a.host(0), key));
  }
  ASSERT_EQ(UploadedAll(a.host(0), *s3_, 2), absl::OkStatus());
  const CommandResult manifest = Neffctl(a.host(0), {"manifest", "--since=1h"});
  ASSERT_EQ(manifest.exit_code, 0) << manifest.err;
  EXPECT_EQ(manifest.out, absl::StrCat("neff ", kCompilerVersion, " w0\n",
                                       "neff ", kCompilerVersion, " w1\n"));
  const std::string file = root_ + "/manifest";
  WriteFile(file, "# the last job's entries\n" + manifest.out);

  const std::string metrics = root_ + "/b0.prom";
  std::vector<std::string> flags = RemoteFlags(*s3_);
  flags.push_back("--metrics_textfile=" + metrics);
  flags.push_back("--metrics_interval=0.2");
  Cluster b(root_ + "/b", flags);
  b.AddHost("b0", S3Env());
  b.AddHost("b1", S3Env());
  WriteFile(root_ + "/bad", "neff w0\n");
  const CommandResult bad =
      Neffctl(b.host(0), {"warm", "--manifest=" + root_ + "/bad"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_EQ(bad.err, "neffctl: " + root_ + "/bad:1: expected NS VERSION KEY\n");

  const CommandResult warm = Neffctl(b.host(0), {"warm", "--manifest=" + file});
  ASSERT_EQ(warm.exit_code, 0)
      << warm.err << "daemon: " << b.host(0).process().Stderr();
  EXPECT_TRUE(absl::StrContains(warm.out, "2 entries: 2 fetched from S3"))
      << warm.out;
  for (const char* key : {"w0", "w1"}) {
    EXPECT_EQ(ReadFile(SharedArtifact(b, key)), NeffBytes(key)) << key;
  }
  // b0 has the entries in its own tier now; b1 reads the shared store.
  EXPECT_EQ(Lookup(b.host(0), "w0").result(), v1::LookupResponse::HIT);
  EXPECT_EQ(Lookup(b.host(1), "w0").result(), v1::LookupResponse::HIT);
  const v1::Stats b0 = StatsOf(b.host(0));
  EXPECT_EQ(b0.hits_remote(), 2u);
  EXPECT_EQ(b0.hits_local(), 1u);
  EXPECT_GT(b0.remote_bytes_in(), 2 * NeffBytes("w0").size());
  EXPECT_EQ(StatsOf(b.host(1)).hits_shared(), 1u);

  const CommandResult text = Neffctl(b.host(0), {"stats"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_TRUE(absl::StrContains(text.out, "1 / 0 / 2")) << text.out;
  EXPECT_TRUE(absl::StrContains(text.out, "s3://neffd-test/cache")) << text.out;
  const CommandResult json = Neffctl(b.host(0), {"--json", "stats"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(absl::StrContains(json.out, "\"hits_remote\":\"2\"")) << json.out;
  EXPECT_TRUE(absl::StrContains(json.out, "\"remote_breaker\":\"closed\""))
      << json.out;
  EXPECT_TRUE(WaitUntil(
      [&] {
        return absl::StrContains(ReadFile(metrics),
                                 "neffd_hits_total{tier=\"remote\"} 2");
      },
      absl::Seconds(10)))
      << ReadFile(metrics);
  EXPECT_TRUE(
      absl::StrContains(ReadFile(metrics), "neffd_remote_upload_queue 0"));
}

}  // namespace
}  // namespace neffd::test_support
