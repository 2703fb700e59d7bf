// tests/harness/etcd_server.h
//
// A real etcd (Debian's etcd-server, /usr/bin/etcd) for the coordination
// tests of issue 32: one member, or a cluster of several, on free 127.0.0.1
// ports with their data in a directory of the test's, killed when the
// object goes. Start and Restart return once every member says it serves
// client requests (its log), so a test never sleeps for it.
// deploy/install-deps.sh installs etcd-server; when it is missing Start
// fails saying so (a skip would hide a broken install).
//
// Not thread-safe per object.
#ifndef NEFFD_TESTS_HARNESS_ETCD_SERVER_H_
#define NEFFD_TESTS_HARNESS_ETCD_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/harness/process.h"

namespace neffd::test_support {

inline constexpr char kEtcdBinary[] = "/usr/bin/etcd";

class EtcdServer {
 public:
  // `members` etcd processes forming one cluster, each also given `flags`
  // (e.g. a shorter --election-timeout, which lowers etcd's minimum TTL).
  // With `tls_dir` (tests/harness/tls.h's MakeTestCertificates), clients
  // must speak mutual TLS: {tls_dir}/server.pem and .key serve, client
  // certificates are checked against {tls_dir}/ca.pem.
  static absl::StatusOr<std::unique_ptr<EtcdServer>> Start(
      const std::string& data_dir, int members = 1,
      const std::vector<std::string>& flags = {},
      const std::string& tls_dir = "");
  ~EtcdServer();

  // "127.0.0.1:PORT[,127.0.0.1:PORT...]", every member's, for
  // EtcdOptions::endpoints and neffd's --coordinator=etcd://...
  std::string endpoint() const;
  // SIGKILL every member, and reap them: their ports refuse connections.
  void Kill();
  // SIGKILL member `i` only (a cluster of three keeps its quorum).
  void KillMember(int i);
  // Starts the killed members again on their ports and data (etcd comes
  // back with its keys and leases) and waits until they serve.
  absl::Status Restart();

 private:
  struct Member {
    std::vector<std::string> argv;
    int client_port = 0;
    std::unique_ptr<Process> process;
  };
  explicit EtcdServer(std::vector<Member> members)
      : members_(std::move(members)) {}
  // Starts `member`; Restart waits for it to serve.
  static void Launch(Member& member);
  static bool Serving(Process& process);

  std::vector<Member> members_;
};

// A 127.0.0.1 TCP port nothing listens on now.
int UnusedLoopbackPort();

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_HARNESS_ETCD_SERVER_H_
