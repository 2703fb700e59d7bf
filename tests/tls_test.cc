// TCP only with mutual TLS (issues 9 and 19): a non-loopback TCP address is
// served only with --tls_cert, --tls_key and --tls_client_ca, and the
// daemon verifies client certificates: neffctl with a certificate signed by
// the CA gets answers; without a certificate, with one the CA did not sign,
// or in plaintext, it does not. Without the three files neffd refuses to
// start on a non-loopback address with one line; half a set is refused too.
// The certificates are made by `openssl` here.
#include <signal.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

std::vector<std::string> DaemonArgs(const std::string& root) {
  return {Runfile("daemon/neffd"), "--local_dir=" + root + "/local",
          "--cache_dir=" + root + "/neff", "--hlo_cache_dir=" + root + "/hlo",
          // Loopback TCP: no socket file to clash with other tests.
          "--admin_address=127.0.0.1:0"};
}

void OpenSsl(std::vector<std::string> args) {
  args.insert(args.begin(), "/usr/bin/openssl");
  CommandResult r = RunCommand(args);
  ASSERT_EQ(r.exit_code, 0) << r.err;
}

// {dir}/NAME.pem and NAME.key, signed by {dir}/ca (or self-signed when
// `ca` is empty), valid for 127.0.0.1 and localhost.
void MakeCertificate(const std::string& dir, const std::string& name,
                     const std::string& ca) {
  const std::string base = dir + "/" + name;
  OpenSsl({"req", "-newkey", "rsa:2048", "-nodes", "-keyout", base + ".key",
           "-out", base + ".csr", "-subj", "/CN=" + name});
  WriteFile(base + ".ext", "subjectAltName=IP:127.0.0.1,DNS:localhost\n");
  if (ca.empty()) {
    OpenSsl({"x509", "-req", "-in", base + ".csr", "-signkey", base + ".key",
             "-out", base + ".pem", "-days", "2", "-extfile", base + ".ext"});
  } else {
    OpenSsl({"x509", "-req", "-in", base + ".csr", "-CA",
             dir + "/" + ca + ".pem", "-CAkey", dir + "/" + ca + ".key",
             "-CAcreateserial", "-out", base + ".pem", "-days", "2", "-extfile",
             base + ".ext"});
  }
}

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TestTempDir();
    OpenSsl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
             root_ + "/ca.key", "-out", root_ + "/ca.pem", "-days", "2",
             "-subj", "/CN=neffd test CA"});
    MakeCertificate(root_, "server", "ca");
    MakeCertificate(root_, "client", "ca");
    MakeCertificate(root_, "rogue", "");
  }

  // neffctl lookup through 127.0.0.1:port with `tls` options.
  CommandResult Lookup(std::vector<std::string> tls) {
    std::vector<std::string> argv = {
        Runfile("client/neffctl"), absl::StrCat("--address=127.0.0.1:", port_),
        "--compiler_version=1.0"};
    argv.insert(argv.end(), tls.begin(), tls.end());
    argv.insert(argv.end(), {"lookup", "neff", "k"});
    return RunCommand(argv);
  }

  // Lookup through gRPC's own TLS client with `ssl`.
  grpc::Status GrpcLookup(const grpc::SslCredentialsOptions& ssl) {
    auto stub = v1::CompileCache::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", port_), grpc::SslCredentials(ssl)));
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

  std::vector<std::string> ClientFiles(const std::string& name) {
    return {"--tls_cert=" + root_ + "/" + name + ".pem",
            "--tls_key=" + root_ + "/" + name + ".key",
            "--tls_ca=" + root_ + "/ca.pem"};
  }

  std::string root_;
  int port_ = 20000 + getpid() % 30000;
};

TEST_F(TlsTest, OnlyClientsWithACertificateSignedByTheCaAreServed) {
  std::vector<std::string> args = DaemonArgs(root_);
  args.push_back(absl::StrCat("--address=0.0.0.0:", port_));
  args.push_back("--tls_cert=" + root_ + "/server.pem");
  args.push_back("--tls_key=" + root_ + "/server.key");
  args.push_back("--tls_client_ca=" + root_ + "/ca.pem");
  Process daemon(args);
  for (int i = 0; i < 500 && !absl::StrContains(daemon.Stdout(), "listening");
       ++i) {
    usleep(20000);
  }
  ASSERT_TRUE(absl::StrContains(daemon.Stdout(), "listening"))
      << daemon.Stderr();

  // A miss (exit 1) is an answer from the daemon.
  CommandResult signed_client = Lookup(ClientFiles("client"));
  EXPECT_EQ(signed_client.exit_code, 1) << signed_client.err;
  // No certificate: the client trusts the server, the server refuses it.
  grpc::SslCredentialsOptions ssl;
  ssl.pem_root_certs = ReadFile(root_ + "/ca.pem");
  EXPECT_EQ(GrpcLookup(ssl).error_code(), grpc::StatusCode::UNAVAILABLE);
  ssl.pem_cert_chain = ReadFile(root_ + "/client.pem");
  ssl.pem_private_key = ReadFile(root_ + "/client.key");
  EXPECT_EQ(GrpcLookup(ssl).error_code(), grpc::StatusCode::OK);
  CommandResult rogue = Lookup(ClientFiles("rogue"));
  EXPECT_EQ(rogue.exit_code, 3) << rogue.err;
  CommandResult plaintext = Lookup({});
  EXPECT_EQ(plaintext.exit_code, 3) << plaintext.err;
  CommandResult half = Lookup({"--tls_ca=" + root_ + "/ca.pem"});
  EXPECT_EQ(half.exit_code, 2) << half.err;

  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0);
}

TEST_F(TlsTest, NonLoopbackWithoutMutualTlsIsRefusedWithOneLine) {
  const std::string address = absl::StrCat("--address=0.0.0.0:", port_);
  const std::string cert = "--tls_cert=" + root_ + "/server.pem";
  const std::string key = "--tls_key=" + root_ + "/server.key";
  const std::string ca = "--tls_client_ca=" + root_ + "/ca.pem";
  for (const std::vector<std::string>& extra :
       std::vector<std::vector<std::string>>{
           {address},
           {address, cert},
           {address, cert, key},
           {"--address=unix:/tmp/neffd-tls-test.sock",
            "--admin_address=unix:/tmp/neffd-tls-test-admin.sock", cert, key,
            ca},
           {address, "--tls_cert=" + root_ + "/missing.pem", key, ca}}) {
    std::vector<std::string> args = DaemonArgs(root_);
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = RunCommand(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "tls")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

}  // namespace
}  // namespace neffd::test_support
