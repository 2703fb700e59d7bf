// tests/harness/etcd_server.h
//
// A real etcd (Debian's etcd-server, /usr/bin/etcd) for the coordination
// tests of issue 32: one member on free 127.0.0.1 ports with its data in a
// directory of the test's, killed when its object goes. Start returns once
// the member says it serves client requests (its log), so a test never
// sleeps for it. deploy/install-deps.sh installs etcd-server; when it is
// missing Start fails saying so (a skip would hide a broken install).
//
// Not thread-safe per object.
#ifndef NEFFD_TESTS_HARNESS_ETCD_SERVER_H_
#define NEFFD_TESTS_HARNESS_ETCD_SERVER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tests/harness/process.h"

namespace neffd::test_support {

inline constexpr char kEtcdBinary[] = "/usr/bin/etcd";

class EtcdServer {
 public:
  static absl::StatusOr<std::unique_ptr<EtcdServer>> Start(
      const std::string& data_dir);

  // "127.0.0.1:PORT", for EtcdOptions::endpoints.
  std::string endpoint() const;
  // SIGKILL, and reap it: its port refuses connections afterwards.
  void Kill();

 private:
  EtcdServer(std::unique_ptr<Process> process, int client_port)
      : process_(std::move(process)), client_port_(client_port) {}

  std::unique_ptr<Process> process_;
  int client_port_;
};

// A 127.0.0.1 TCP port nothing listens on now.
int UnusedLoopbackPort();

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_HARNESS_ETCD_SERVER_H_
