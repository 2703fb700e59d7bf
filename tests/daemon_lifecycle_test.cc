// A real neffd across restarts, SIGKILL, SIGTERM and damage behind its back;
// health and reflection as grpcurl sees them; refusal of bad configurations.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpc/reflection/v1alpha/reflection.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "tests/harness/process.h"
#include "tests/harness/store_files.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

class DaemonLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TestTempDir();
    daemon_ = std::make_unique<DaemonProcess>(root_);
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
  }

  CommandResult Ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = {Runfile("client/neffctl"),
                                     "--address=" + daemon_->address(),
                                     "--compiler_version=2.19.1"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  std::string root_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(DaemonLifecycleTest, PublishedEntrySurvivesSigkillWithItsLayout) {
  const std::string neff(300000, 'n');
  WriteFile(root_ + "/in.neff", neff);
  CommandResult put =
      Ctl({"--json", "put", "neff", "deadbeef", root_ + "/in.neff"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  EXPECT_TRUE(absl::StrContains(put.out, "\"outcome\":\"PUBLISHED\""));

  daemon_->Signal(SIGKILL);
  EXPECT_EQ(daemon_->Wait(), 128 + SIGKILL);
  ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();

  CommandResult lookup = Ctl({"--json", "lookup", "neff", "deadbeef"});
  EXPECT_EQ(lookup.exit_code, 0) << lookup.err;
  EXPECT_TRUE(absl::StrContains(lookup.out, "\"result\":\"HIT\""));
  EXPECT_TRUE(absl::StrContains(lookup.out, Sha256Hex(neff)));
  const EntryFiles files = FilesOf(root_ + "/neff", "deadbeef");
  EXPECT_EQ(ReadFile(files.artifact), neff);
  EXPECT_TRUE(fs::exists(files.done));

  CommandResult get = Ctl({"get", "neff", "deadbeef", root_ + "/out.neff"});
  EXPECT_EQ(get.exit_code, 0) << get.err;
  EXPECT_EQ(ReadFile(root_ + "/out.neff"), neff);
}

TEST_F(DaemonLifecycleTest, SigtermExitsCleanlyAndTheIndexServesAfterRestart) {
  WriteFile(root_ + "/in.neff", "abc");
  ASSERT_EQ(Ctl({"put", "neff", "k1", root_ + "/in.neff"}).exit_code, 0);
  daemon_->Signal(SIGTERM);
  EXPECT_EQ(daemon_->Wait(), 0);
  EXPECT_TRUE(absl::StrContains(daemon_->process().Stderr(), "stopped"));
  EXPECT_FALSE(fs::exists(daemon_->socket_path()));
  ASSERT_TRUE(daemon_->Start());
  CommandResult stats = Ctl({"--json", "stats"});
  EXPECT_TRUE(absl::StrContains(stats.out, "\"entries\":\"1\"")) << stats.out;
  EXPECT_EQ(Ctl({"lookup", "neff", "k1"}).exit_code, 0);
}

TEST(DaemonShutdownTest, SigtermLetsAnInFlightPublishFinish) {
  const std::string root = NewTempDir("inflight");
  DaemonProcess daemon(root, {"--shutdown_grace=120"});
  ASSERT_TRUE(daemon.Start());
  auto stub = daemon.NewStub();
  v1::LockRequest lock;
  lock.mutable_id()->set_namespace_("neff");
  lock.mutable_id()->set_compiler_version("1.0");
  lock.mutable_id()->set_key("big");
  v1::LockResponse granted;
  grpc::ClientContext lock_context;
  ASSERT_TRUE(stub->Lock(&lock_context, lock, &granted).ok());
  // 512 MiB of zeros (sparse to write, real work to copy and hash).
  const std::string staged = granted.lease().staging_dir() + "/big.neff";
  ASSERT_EQ(truncate((WriteFile(staged, ""), staged).c_str(), 512 << 20), 0);
  v1::PublishRequest publish;
  publish.set_lease_id(granted.lease().lease_id());
  *publish.mutable_id() = lock.id();
  publish.set_staged_path(staged);
  publish.set_size(512 << 20);
  publish.set_sha256(
      "9acca8e8c22201155389f65abbf6bc9723edc7384ead80503839f49dcc56d767");
  grpc::Status published;
  std::thread publisher([&] {
    v1::PublishResponse response;
    grpc::ClientContext context;
    published = stub->Publish(&context, publish, &response);
  });
  // SIGTERM only once the publish is in flight (its lease is publishing).
  EXPECT_TRUE(WaitUntil([&] {
    const v1::LocksResponse locks = GetLocks(daemon);
    return locks.leases_size() == 1 && locks.leases(0).publishing();
  })) << "the publish never started";
  daemon.Signal(SIGTERM);
  publisher.join();
  EXPECT_TRUE(published.ok()) << published.error_message();
  EXPECT_EQ(daemon.Wait(), 0);
  ASSERT_TRUE(daemon.Start());
  v1::LookupRequest lookup;
  *lookup.mutable_id() = lock.id();
  v1::LookupResponse hit;
  grpc::ClientContext lookup_context;
  ASSERT_TRUE(daemon.NewStub()->Lookup(&lookup_context, lookup, &hit).ok());
  EXPECT_EQ(hit.result(), v1::LookupResponse::HIT);
  EXPECT_EQ(hit.entry().size(), 512u << 20);
}

TEST_F(DaemonLifecycleTest, TruncatedNeffIsNeverServed) {
  WriteFile(root_ + "/in.neff", std::string(4096, 'x'));
  ASSERT_EQ(Ctl({"put", "neff", "k2", root_ + "/in.neff"}).exit_code, 0);
  ASSERT_EQ(Ctl({"lookup", "neff", "k2"}).exit_code, 0);
  const std::string neff = FilesOf(root_ + "/neff", "k2").artifact;
  ASSERT_EQ(truncate(neff.c_str(), 100), 0);
  // The daemon re-checks a hot entry's shared copy once a second (until
  // then it serves its own verified local copy, never the damaged file).
  absl::SleepFor(absl::Seconds(1.2));

  CommandResult lookup = Ctl({"--json", "lookup", "neff", "k2"});
  EXPECT_EQ(lookup.exit_code, 1);
  EXPECT_TRUE(absl::StrContains(lookup.out, "MISS")) << lookup.out;
  EXPECT_EQ(Ctl({"get", "neff", "k2", root_ + "/out"}).exit_code, 1);
  EXPECT_FALSE(fs::exists(root_ + "/out"));
  EXPECT_TRUE(fs::exists(root_ + "/neff/quarantine"));
  // A new publish recompiles it.
  CommandResult again =
      Ctl({"--json", "put", "neff", "k2", root_ + "/in.neff"});
  EXPECT_TRUE(absl::StrContains(again.out, "PUBLISHED")) << again.out;
}

TEST_F(DaemonLifecycleTest, HealthAndReflectionAnswerLikeGrpcurlNeeds) {
  auto channel = grpc::CreateChannel(daemon_->address(),
                                     grpc::InsecureChannelCredentials());
  auto health = grpc::health::v1::Health::NewStub(channel);
  grpc::health::v1::HealthCheckRequest check;
  grpc::health::v1::HealthCheckResponse status;
  grpc::ClientContext health_context;
  ASSERT_TRUE(health->Check(&health_context, check, &status).ok());
  EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::SERVING);

  auto reflection =
      grpc::reflection::v1alpha::ServerReflection::NewStub(channel);
  grpc::ClientContext context;
  auto stream = reflection->ServerReflectionInfo(&context);
  grpc::reflection::v1alpha::ServerReflectionRequest list;
  list.set_list_services("");
  ASSERT_TRUE(stream->Write(list));
  grpc::reflection::v1alpha::ServerReflectionResponse response;
  ASSERT_TRUE(stream->Read(&response));
  std::vector<std::string> services;
  for (const auto& s : response.list_services_response().service()) {
    services.push_back(s.name());
  }
  EXPECT_NE(
      std::find(services.begin(), services.end(), "neffd.v1.CompileCache"),
      services.end());
  EXPECT_NE(
      std::find(services.begin(), services.end(), "grpc.health.v1.Health"),
      services.end());
  // `grpcurl describe neffd.v1.CompileCache` needs the file descriptor.
  grpc::reflection::v1alpha::ServerReflectionRequest describe;
  describe.set_file_containing_symbol("neffd.v1.CompileCache");
  ASSERT_TRUE(stream->Write(describe));
  ASSERT_TRUE(stream->Read(&response));
  EXPECT_GT(response.file_descriptor_response().file_descriptor_proto_size(),
            0);
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
}

TEST_F(DaemonLifecycleTest, SecondDaemonOnTheSameSocketIsRefused) {
  DaemonProcess second(*daemon_);
  second.Start();  // the live socket answers, but it is the first daemon's
  EXPECT_EQ(second.Wait(), 2);
  EXPECT_TRUE(
      absl::StrContains(second.process().Stderr(), "already listening"));
  // The first one is unharmed.
  EXPECT_EQ(Ctl({"stats"}).exit_code, 0);
}

TEST(DaemonConfigTest, NonLoopbackTcpIsRefusedWithOneLine) {
  const std::string root = NewTempDir("nonloopback");
  CommandResult r = RunCommand(
      {Runfile("daemon/neffd"), "--address=0.0.0.0:7777",
       "--local_dir=" + root + "/local", "--cache_dir=" + root + "/neff",
       "--hlo_cache_dir=" + root + "/hlo"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(r.err, "loopback")) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

TEST(DaemonConfigTest, ServesOnLoopbackTcp) {
  const std::string root = NewTempDir("loopback");
  // Port 0 has no socket file to poll; use the startup line instead.
  Process p({Runfile("daemon/neffd"), "--address=127.0.0.1:0",
             "--admin_address=127.0.0.1:0", "--local_dir=" + root + "/local",
             "--cache_dir=" + root + "/neff",
             "--hlo_cache_dir=" + root + "/hlo"});
  for (int i = 0; i < 500 && !absl::StrContains(p.Stdout(), "listening"); ++i) {
    usleep(20000);
  }
  EXPECT_TRUE(absl::StrContains(p.Stdout(), "listening on 127.0.0.1:0"));
  p.Signal(SIGTERM);
  EXPECT_EQ(p.Wait(), 0);
}

}  // namespace
}  // namespace neffd::test_support
