// Two sockets (issue 19): the ranks' socket serves CompileCache and the
// read-only operator calls; the calls that change the cache (evict, gc,
// import, drain, undrain, stats -z) are served only on the admin socket,
// 0600 unless --admin_group is given. neffctl sends them there; sent to the
// ranks' socket they are refused with exit 4 and a message naming the admin
// socket. Both sockets answer reflection (grpcurl). The daemon knows who
// connected (SO_PEERCRED): a holder on this host is its connection's pid.
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "proto/admin_only.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

std::vector<std::string> ReadDir(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename());
  }
  return names;
}

mode_t ModeOf(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

class AdminSocketTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TestTempDir();
    daemon_ = std::make_unique<DaemonProcess>(root_);
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
    WriteFile(root_ + "/model.neff", "NEFF");
    ASSERT_EQ(Ctl({"put", "neff", "k1", root_ + "/model.neff"}).exit_code, 0);
  }

  // neffctl as an operator: both sockets known.
  CommandResult Ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = daemon_->NeffctlArgv();
    argv.push_back("--compiler_version=2.19.1");
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  // neffctl as a rank that aims a mutating command at the socket it can
  // open, the ranks' socket.
  CommandResult RankCtl(std::vector<std::string> args) {
    std::vector<std::string> argv = {
        Runfile("client/neffctl"), "--address=" + daemon_->address(),
        "--admin_address=" + daemon_->address(), "--compiler_version=2.19.1"};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  std::string root_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(AdminSocketTest, SocketsAndLocalDirsGiveOthersNothing) {
  EXPECT_EQ(ModeOf(daemon_->socket_path()), 0660u);
  EXPECT_EQ(ModeOf(daemon_->admin_address().substr(5)), 0600u);
  // Group-writable and setgid for the ranks' group, nothing for others;
  // staging is sticky too, the tier read-only for the group.
  EXPECT_EQ(ModeOf(daemon_->local_dir() + "/locks"), 02770u);
  EXPECT_EQ(ModeOf(daemon_->local_dir() + "/staging"), 03770u);
  EXPECT_EQ(ModeOf(daemon_->local_dir() + "/tier"), 02750u);
}

TEST_F(AdminSocketTest, MutatingCommandsOnTheRanksSocketAreRefused) {
  const std::vector<std::vector<std::string>> mutating = {
      {"evict", "neff", "k1"},
      {"gc", "--max-size=1"},
      {"drain"},
      {"undrain"},
      {"import", root_ + "/neff"},
      {"stats", "-z"},
  };
  for (const std::vector<std::string>& command : mutating) {
    CommandResult r = RankCtl(command);
    EXPECT_EQ(r.exit_code, 4) << command[0] << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "PERMISSION_DENIED") ||
                absl::StrContains(r.err, "served only on the admin socket"))
        << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, daemon_->admin_address())) << r.err;
  }
  // Nothing changed: the entry is still served and the daemon not drained.
  EXPECT_EQ(Ctl({"lookup", "neff", "k1"}).exit_code, 0);
  EXPECT_EQ(Ctl({"health"}).exit_code, 0);
  // The read-only calls are open to ranks.
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"stats"},
                                             {"ls"},
                                             {"show", "neff", "k1"},
                                             {"locks"},
                                             {"config"},
                                             {"health"},
                                             {"verify"}}) {
    CommandResult r = RankCtl(command);
    EXPECT_EQ(r.exit_code, 0) << command[0] << ": " << r.err;
  }
}

// Every CacheAdmin method on the ranks' socket: the ones neffd.proto marks
// admin_only are refused before they read their request, the others are
// not. So the option, the daemon's check and the handlers agree; the help
// of both binaries and the docs name the same calls.
TEST_F(AdminSocketTest, TheProtosAdminOnlyCallsAreExactlyTheRefusedOnes) {
  const std::vector<std::string> admin_only = AdminOnlyMethods();
  EXPECT_GE(admin_only.size(), 7u);
  auto channel = grpc::CreateChannel(daemon_->address(),
                                     grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  const google::protobuf::ServiceDescriptor* service =
      google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(
          v1::CacheAdmin::service_full_name());
  ASSERT_NE(service, nullptr);
  for (int i = 0; i < service->method_count(); ++i) {
    const std::string method = service->method(i)->name();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    grpc::CompletionQueue queue;
    // An empty message, which every request type parses (all defaults).
    grpc::Slice no_bytes("");
    grpc::ByteBuffer empty_request(&no_bytes, 1), response;
    grpc::Status status;
    auto call = stub.PrepareUnaryCall(
        &context, absl::StrCat("/", service->full_name(), "/", method),
        empty_request, &queue);
    call->StartCall();
    call->Finish(&response, &status, reinterpret_cast<void*>(1));
    void* tag = nullptr;
    bool ok = false;
    ASSERT_TRUE(queue.Next(&tag, &ok)) << method;
    const bool marked = absl::c_linear_search(admin_only, method);
    EXPECT_EQ(marked, IsAdminOnly(method)) << method;
    EXPECT_EQ(status.error_code() == grpc::StatusCode::PERMISSION_DENIED,
              marked)
        << method << ": " << status.error_code() << " "
        << status.error_message();
    if (marked) {
      EXPECT_TRUE(
          absl::StrContains(status.error_message(), daemon_->admin_address()))
          << status.error_message();
    }
  }
  // The help and the security docs name each of them.
  const std::string neffd_help =
      RunCommand({Runfile("daemon/neffd"), "--help"}).out;
  const std::string security = ReadFile(Runfile("docs/SECURITY.md"));
  for (const std::string& method : admin_only) {
    EXPECT_TRUE(absl::StrContains(neffd_help, method)) << method;
    EXPECT_TRUE(absl::StrContains(security, "`" + method + "`")) << method;
  }
  EXPECT_EQ(Ctl({"lookup", "neff", "k1"}).exit_code, 0);
  EXPECT_EQ(Ctl({"health"}).exit_code, 0);
}

TEST_F(AdminSocketTest, MutatingCommandsWorkThroughTheAdminSocket) {
  CommandResult drain = Ctl({"drain"});
  EXPECT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_EQ(Ctl({"health"}).exit_code, 1);
  EXPECT_EQ(Ctl({"undrain"}).exit_code, 0);
  EXPECT_EQ(Ctl({"stats", "-z"}).exit_code, 0);
  CommandResult evict = Ctl({"evict", "neff", "k1"});
  EXPECT_EQ(evict.exit_code, 0) << evict.err;
  EXPECT_EQ(Ctl({"lookup", "neff", "k1"}).exit_code, 1);
}

TEST_F(AdminSocketTest, AnUnreachableAdminSocketIsExitThree) {
  const std::string nobody = daemon_->socket_path() + ".nobody";
  CommandResult r =
      RunCommand({Runfile("client/neffctl"), "--address=" + daemon_->address(),
                  "--admin_address=unix:" + nobody, "drain"});
  EXPECT_EQ(r.exit_code, 3) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, nobody)) << r.err;
}

TEST_F(AdminSocketTest, BothSocketsServeReflectionAndHealth) {
  for (const std::string& socket :
       {daemon_->socket_path(), daemon_->admin_address().substr(5)}) {
    CommandResult list =
        RunCommand({"/usr/bin/python3", Runfile("tests/grpcurl.py"),
                    "-plaintext", "-unix", socket, "list"});
    EXPECT_EQ(list.exit_code, 0) << list.err;
    EXPECT_TRUE(absl::StrContains(list.out, "neffd.v1.CacheAdmin")) << socket;
    EXPECT_TRUE(absl::StrContains(list.out, "grpc.health.v1.Health")) << socket;
  }
  CommandResult refused = RunCommand(
      {"/usr/bin/python3", Runfile("tests/grpcurl.py"), "-plaintext", "-unix",
       daemon_->socket_path(), "neffd.v1.CacheAdmin/Drain"});
  EXPECT_NE(refused.exit_code, 0);
  EXPECT_TRUE(
      absl::StrContains(refused.out + refused.err, "PermissionDenied") ||
      absl::StrContains(refused.out + refused.err, "PERMISSION_DENIED"))
      << refused.out << refused.err;
}

TEST(PeerCredentialsTest, ALocalHoldersPidIsTheKernelsNotTheClaim) {
  DaemonProcess daemon(TestTempDir(), {"--host_id=peer-test-host"});
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  auto stub = daemon.NewStub();
  v1::LockRequest lock;
  lock.mutable_id()->set_namespace_("neff");
  lock.mutable_id()->set_compiler_version("2.19.1");
  lock.mutable_id()->set_key("claimed");
  lock.mutable_holder()->set_host("peer-test-host");
  lock.mutable_holder()->set_pid(999999);  // someone else's, or nobody's
  v1::LockResponse granted;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->Lock(&context, lock, &granted).ok());
  ASSERT_EQ(granted.outcome(), v1::LockResponse::GRANTED);
  CommandResult locks = RunCommand(
      {Runfile("client/neffctl"), "--address=" + daemon.address(), "locks"});
  EXPECT_TRUE(absl::StrContains(locks.out,
                                absl::StrCat("peer-test-host pid ", getpid())))
      << locks.out;
  EXPECT_FALSE(absl::StrContains(locks.out, "999999")) << locks.out;
}

TEST(StagingQuotaTest, APublishOverTheStagingQuotaIsRefused) {
  const std::string root = TestTempDir();
  DaemonProcess daemon(root, {"--staging_quota_per_uid=1000"});
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  WriteFile(root + "/big.neff", std::string(5000, 'n'));
  std::vector<std::string> put = daemon.NeffctlArgv();
  put.insert(put.end(), {"--compiler_version=1", "put", "neff", "big",
                         root + "/big.neff"});
  CommandResult r = RunCommand(put);
  EXPECT_EQ(r.exit_code, 4) << r.err;
  EXPECT_TRUE(absl::StrContains(r.err, "--staging_quota_per_uid")) << r.err;
  // Nothing was published, and the staged file is gone.
  std::vector<std::string> lookup = daemon.NeffctlArgv();
  lookup.insert(lookup.end(),
                {"--compiler_version=1", "lookup", "neff", "big"});
  EXPECT_EQ(RunCommand(lookup).exit_code, 1);
  EXPECT_TRUE(ReadDir(daemon.local_dir() + "/staging").empty());
}

}  // namespace
}  // namespace neffd::test_support
