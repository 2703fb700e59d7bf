// tests/harness/tls.h
//
// Mutual TLS for the tests (docs/SECURITY.md): certificates made with the
// system's `openssl`, and a real neffd that serves a TCP port with them.
//
// MakeTestCertificates(dir) writes, valid for two days for 127.0.0.1 and
// localhost: {dir}/ca.pem and ca.key (the CA), and {dir}/NAME.pem and
// NAME.key for "server" and "client" (signed by the CA) and "rogue"
// (self-signed). It fails the running test (a fatal gtest failure) if
// openssl does.
//
// Not thread-safe against another thread using the same directory.
#ifndef NEFFD_TESTS_HARNESS_TLS_H_
#define NEFFD_TESTS_HARNESS_TLS_H_

#include <memory>
#include <string>
#include <vector>

#include "tests/harness/process.h"

namespace neffd::test_support {

void MakeTestCertificates(const std::string& dir);

// neffd's flags for a store under `root` whose admin address is loopback TCP
// (no socket file to clash with other tests); the caller adds --address.
std::vector<std::string> TlsDaemonArgs(const std::string& root);

// neffd with TlsDaemonArgs(root), serving 0.0.0.0:`port` with mutual TLS:
// {certs}/server.pem and .key, clients verified against {certs}/ca.pem. Null
// unless it says it is listening within 10 s.
std::unique_ptr<Process> StartTlsDaemon(const std::string& root,
                                        const std::string& certs, int port);

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_HARNESS_TLS_H_
