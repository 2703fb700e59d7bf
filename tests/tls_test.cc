// TCP only with mutual TLS (issues 9 and 19): a non-loopback TCP address is
// served only with --tls_cert, --tls_key and --tls_client_ca, and the
// daemon verifies client certificates: neffctl with a certificate signed by
// the CA gets answers; without a certificate, with one the CA did not sign,
// or in plaintext, it does not. Without the three files neffd refuses to
// start on a non-loopback address with one line; half a set is refused too.
// The C ABI (neff_client_new_tls) gets hits over mutual TLS, does what the
// C++ client does without a client certificate, and refuses a file it
// cannot read. The certificates are made by `openssl`
// (tests/harness/tls.h).
#include "tests/harness/tls.h"

#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/cache_client.h"
#include "client/neffclient.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

class TlsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TestTempDir();
    MakeTestCertificates(root_);
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
  std::unique_ptr<Process> daemon = StartTlsDaemon(root_, root_, port_);
  ASSERT_NE(daemon, nullptr);

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

  daemon->Signal(SIGTERM);
  EXPECT_EQ(daemon->Wait(), 0);
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
    std::vector<std::string> args = TlsDaemonArgs(root_);
    args.insert(args.end(), extra.begin(), extra.end());
    CommandResult r = RunCommand(args);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "tls")) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
}

// The C ABI's compile callback: writes the bytes `user_data` points to.
neff_compile_status WriteNeff(void* user_data, const neff_compile_job* job) {
  FILE* out = std::fopen(job->output_path, "wb");
  if (out == nullptr) return NEFF_COMPILE_CANCELLED;
  std::fputs(static_cast<const char*>(user_data), out);
  std::fclose(out);
  return NEFF_COMPILE_OK;
}

// C ABI clients of the daemon at 127.0.0.1:port_, whose fallback (the cache
// directories a client uses without the daemon) is {root}/fallback, so a
// path there was never served by the daemon and one in {root}/local/tier
// always was.
class CAbiTlsTest : public TlsTest {
 protected:
  void SetUp() override {
    TlsTest::SetUp();
    daemon_ = StartTlsDaemon(root_, root_, port_);
    ASSERT_NE(daemon_, nullptr);
    const std::pair<std::string, std::string> dirs[] = {
        {"TORCH_NEURONX_NEFF_CACHE_DIR", "neff"},
        {"TORCH_NEURONX_HLO_CACHE_DIR", "hlo"},
        {"TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", "local"},
        {"TORCH_NEURONX_DEBUG_DIR", "debug"}};
    for (const auto& [var, dir] : dirs) {
      setenv(var.c_str(), (root_ + "/fallback/" + dir).c_str(), 1);
    }
  }

  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string File(const std::string& name) const { return root_ + "/" + name; }

  // A client with the CA and, when `name` is given, NAME.pem and NAME.key.
  neff_client* NewClient(const std::string& name) {
    neff_client* client = nullptr;
    const std::string cert = name.empty() ? "" : File(name + ".pem");
    const std::string key = name.empty() ? "" : File(name + ".key");
    EXPECT_EQ(neff_client_new_tls(address().c_str(), File("ca.pem").c_str(),
                                  cert.c_str(), key.c_str(), &client),
              NEFF_OK)
        << neff_last_error();
    return client;
  }

  std::unique_ptr<Process> daemon_;
};

TEST_F(CAbiTlsTest, ClientWithCertificateCompilesOnceThenHitsThroughTheDaemon) {
  neff_client* first = NewClient("client");
  ASSERT_NE(first, nullptr);
  char* path = nullptr;
  ASSERT_EQ(neff_get_or_compile(first, "neff", "1.0", "tlskey", WriteNeff,
                                const_cast<char*>("neff over TLS"), &path),
            NEFF_OK)
      << neff_last_error();
  neff_free(path);
  neff_client_free(first);

  neff_client* second = NewClient("client");
  ASSERT_NE(second, nullptr);
  ASSERT_EQ(neff_lookup(second, "neff", "1.0", "tlskey", &path), NEFF_OK)
      << neff_last_error();
  ASSERT_NE(path, nullptr);
  EXPECT_TRUE(absl::StartsWith(path, root_ + "/local/tier/")) << path;
  EXPECT_EQ(ReadFile(path), "neff over TLS");
  neff_free(path);
  neff_client_free(second);
}

// CacheClientOptions::tls without a client certificate: the C++ client
// warns, connects without TLS, is refused and serves from its cache
// directories. The C ABI given the same files does the same.
TEST_F(CAbiTlsTest, ClientWithoutCertificateDoesWhatTheCppClientDoes) {
  neff_client* with_certificate = NewClient("client");
  ASSERT_NE(with_certificate, nullptr);
  char* path = nullptr;
  ASSERT_EQ(
      neff_get_or_compile(with_certificate, "neff", "1.0", "held", WriteNeff,
                          const_cast<char*>("daemon's"), &path),
      NEFF_OK)
      << neff_last_error();
  neff_free(path);
  neff_client_free(with_certificate);

  CacheClientOptions options = CacheClientOptions::FromEnv(
      config::EnvSnapshot::FromProcessEnvironment());
  options.address = address();
  options.tls.ca = File("ca.pem");
  std::vector<std::string> warnings;
  options.warn = [&](const std::string& m) { warnings.push_back(m); };
  CacheClient cpp(options);
  absl::StatusOr<std::optional<CacheResult>> cpp_lookup =
      cpp.Lookup("neff", "1.0", "held");
  ASSERT_TRUE(cpp_lookup.ok()) << cpp_lookup.status();
  EXPECT_FALSE(cpp_lookup->has_value()) << (*cpp_lookup)->path;
  ASSERT_FALSE(warnings.empty());
  EXPECT_TRUE(absl::StrContains(warnings[0], "connecting without TLS"))
      << warnings[0];
  absl::StatusOr<CacheResult> cpp_compiled =
      cpp.GetOrCompile("neff", "1.0", "cpp", [](const CompileJob& job) {
        WriteFile(job.output_path, "fallback");
        return CompileResult::Ok();
      });
  ASSERT_TRUE(cpp_compiled.ok()) << cpp_compiled.status();
  EXPECT_TRUE(cpp_compiled->fallback);
  EXPECT_TRUE(absl::StartsWith(cpp_compiled->path, root_ + "/fallback/neff/"))
      << cpp_compiled->path;

  neff_client* c = NewClient("");
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(neff_lookup(c, "neff", "1.0", "held", &path), NEFF_MISS);
  EXPECT_EQ(path, nullptr);
  ASSERT_EQ(neff_get_or_compile(c, "neff", "1.0", "c", WriteNeff,
                                const_cast<char*>("fallback"), &path),
            NEFF_OK)
      << neff_last_error();
  EXPECT_TRUE(absl::StartsWith(path, root_ + "/fallback/neff/")) << path;
  neff_free(path);
  neff_client_free(c);
}

TEST_F(CAbiTlsTest, FileThatCannotBeReadIsAnErrorNamingIt) {
  const std::string missing = root_ + "/missing.key";
  neff_client* client = nullptr;
  EXPECT_EQ(
      neff_client_new_tls(address().c_str(), File("ca.pem").c_str(),
                          File("client.pem").c_str(), missing.c_str(), &client),
      NEFF_INVALID_ARGUMENT);
  EXPECT_EQ(client, nullptr);
  EXPECT_TRUE(absl::StrContains(neff_last_error(), "tls_key"))
      << neff_last_error();
  EXPECT_TRUE(absl::StrContains(neff_last_error(), missing))
      << neff_last_error();
}

}  // namespace
}  // namespace neffd::test_support
