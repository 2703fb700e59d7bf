#include "tests/harness/etcd_server.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace neffd::test_support {

int UnusedLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = 0;
  if (fd >= 0 && bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  if (fd >= 0) close(fd);
  return port;
}

absl::StatusOr<std::unique_ptr<EtcdServer>> EtcdServer::Start(
    const std::string& data_dir) {
  if (access(kEtcdBinary, X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        kEtcdBinary, " is missing: run deploy/install-deps.sh (etcd-server)"));
  }
  // A port picked free may be taken before etcd binds it: try again with
  // others (etcd exits at once when it cannot bind), in a fresh data
  // directory (the last one remembers its ports).
  std::string failure;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const int client = UnusedLoopbackPort();
    int peer = UnusedLoopbackPort();
    while (peer == client) peer = UnusedLoopbackPort();
    const std::string client_url = absl::StrCat("http://127.0.0.1:", client);
    const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer);
    auto process = std::make_unique<Process>(std::vector<std::string>{
        kEtcdBinary, "--name=neffd-test",
        absl::StrCat("--data-dir=", data_dir, "/attempt-", attempt),
        "--listen-client-urls=" + client_url,
        "--advertise-client-urls=" + client_url,
        "--listen-peer-urls=" + peer_url,
        "--initial-advertise-peer-urls=" + peer_url,
        "--initial-cluster=neffd-test=" + peer_url,
        "--initial-cluster-state=new"});
    const bool serving = WaitUntil(
        [&] {
          return !process->Running() ||
                 absl::StrContains(process->Stderr(),
                                   "ready to serve client requests");
        },
        absl::Seconds(60));
    if (serving && process->Running()) {
      return std::unique_ptr<EtcdServer>(
          new EtcdServer(std::move(process), client));
    }
    failure = absl::StrCat("exit ", process->Wait(), ": ", process->Stderr());
  }
  return absl::InternalError(
      absl::StrCat("etcd did not start (", failure, ")"));
}

std::string EtcdServer::endpoint() const {
  return absl::StrCat("127.0.0.1:", client_port_);
}

void EtcdServer::Kill() {
  process_->Signal(SIGKILL);
  process_->Wait();
}

}  // namespace neffd::test_support
