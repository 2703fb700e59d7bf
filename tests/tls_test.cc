// TLS (issue 9): a non-loopback TCP address is served only with --tls_cert
// and --tls_key, over gRPC SSL credentials: a TLS client that trusts the
// certificate gets answers, a plaintext client does not; half a key pair or
// TLS on a unix socket is refused at start with one line.
#include <signal.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

std::vector<std::string> DaemonArgs(const std::string& root) {
  return {Runfile("daemon/neffd"), "--local_dir=" + root + "/local",
          "--cache_dir=" + root + "/neff", "--hlo_cache_dir=" + root + "/hlo"};
}

// A self-signed certificate for "neffd.test" in {dir}/cert.pem, key.pem.
void MakeCertificate(const std::string& dir) {
  CommandResult r = RunCommand(
      {"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes",
       "-keyout", dir + "/key.pem", "-out", dir + "/cert.pem", "-days", "2",
       "-subj", "/CN=neffd.test", "-addext", "subjectAltName=DNS:neffd.test"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

grpc::Status Lookup(std::shared_ptr<grpc::Channel> channel) {
  auto stub = v1::CompileCache::NewStub(channel);
  v1::LookupRequest request;
  request.mutable_id()->set_namespace_("neff");
  request.mutable_id()->set_compiler_version("1.0");
  request.mutable_id()->set_key("k");
  v1::LookupResponse response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  return stub->Lookup(&context, request, &response);
}

TEST(TlsTest, NonLoopbackAddressIsServedOverTlsOnly) {
  const std::string root = NewTempDir("tls");
  MakeCertificate(root);
  const int port = 20000 + getpid() % 30000;
  std::vector<std::string> args = DaemonArgs(root);
  args.push_back(absl::StrCat("--address=0.0.0.0:", port));
  args.push_back("--tls_cert=" + root + "/cert.pem");
  args.push_back("--tls_key=" + root + "/key.pem");
  Process daemon(args);
  for (int i = 0; i < 500 && !absl::StrContains(daemon.Stdout(), "listening");
       ++i) {
    usleep(20000);
  }
  ASSERT_TRUE(absl::StrContains(daemon.Stdout(), "listening"))
      << daemon.Stderr();

  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFile(root + "/cert.pem");
  grpc::ChannelArguments channel_args;
  channel_args.SetSslTargetNameOverride("neffd.test");
  const std::string target = absl::StrCat("127.0.0.1:", port);
  EXPECT_TRUE(Lookup(grpc::CreateCustomChannel(
                         target, grpc::SslCredentials(ssl), channel_args))
                  .ok());
  EXPECT_FALSE(
      Lookup(grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))
          .ok());
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0);
}

TEST(TlsTest, HalfAKeyPairOrTlsOnAUnixSocketIsRefused) {
  const std::string root = NewTempDir("tls_bad");
  MakeCertificate(root);
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{
           {"--address=0.0.0.0:7778", "--tls_cert=" + root + "/cert.pem"},
           {"--address=unix:" + root + "/s.sock",
            "--tls_cert=" + root + "/cert.pem",
            "--tls_key=" + root + "/key.pem"},
           {"--address=0.0.0.0:7778", "--tls_cert=" + root + "/missing.pem",
            "--tls_key=" + root + "/key.pem"}}) {
    std::vector<std::string> args = DaemonArgs(root);
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = RunCommand(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "tls")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace neffd::test_support
