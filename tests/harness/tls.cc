#include "tests/harness/tls.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace neffd::test_support {
namespace {

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

}  // namespace

void MakeTestCertificates(const std::string& dir) {
  OpenSsl({"req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout",
           dir + "/ca.key", "-out", dir + "/ca.pem", "-days", "2", "-subj",
           "/CN=neffd test CA"});
  MakeCertificate(dir, "server", "ca");
  MakeCertificate(dir, "client", "ca");
  MakeCertificate(dir, "rogue", "");
}

std::vector<std::string> TlsDaemonArgs(const std::string& root) {
  return {Runfile("daemon/neffd"), "--local_dir=" + root + "/local",
          "--cache_dir=" + root + "/neff", "--hlo_cache_dir=" + root + "/hlo",
          "--admin_address=127.0.0.1:0"};
}

std::unique_ptr<Process> StartTlsDaemon(const std::string& root,
                                        const std::string& certs, int port) {
  std::vector<std::string> args = TlsDaemonArgs(root);
  args.push_back(absl::StrCat("--address=0.0.0.0:", port));
  args.push_back("--tls_cert=" + certs + "/server.pem");
  args.push_back("--tls_key=" + certs + "/server.key");
  args.push_back("--tls_client_ca=" + certs + "/ca.pem");
  auto daemon = std::make_unique<Process>(args);
  if (!WaitUntil(
          [&] { return absl::StrContains(daemon->Stdout(), "listening"); },
          absl::Seconds(10))) {
    ADD_FAILURE() << "neffd did not start: " << daemon->Stderr();
    return nullptr;
  }
  return daemon;
}

}  // namespace neffd::test_support
