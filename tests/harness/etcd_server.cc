#include "tests/harness/etcd_server.h"

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

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

bool EtcdServer::Serving(Process& process) {
  return absl::StrContains(process.Stderr(), "ready to serve client requests");
}

void EtcdServer::Launch(Member& member) {
  member.process = std::make_unique<Process>(member.argv);
  // A cluster's member serves once a quorum of its peers is up: the
  // members are launched together and each waited for afterwards.
}

absl::StatusOr<std::unique_ptr<EtcdServer>> EtcdServer::Start(
    const std::string& data_dir, int members,
    const std::vector<std::string>& flags, const std::string& tls_dir) {
  const char* scheme = tls_dir.empty() ? "http" : "https";
  if (access(kEtcdBinary, X_OK) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        kEtcdBinary, " is missing: run deploy/install-deps.sh (etcd-server)"));
  }
  // A port picked free may be taken before etcd binds it: try again with
  // others (etcd exits at once when it cannot bind), in a fresh data
  // directory (the last one remembers its ports).
  std::string failure;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<int> ports;
    while (ports.size() < static_cast<size_t>(2 * members)) {
      const int port = UnusedLoopbackPort();
      if (std::find(ports.begin(), ports.end(), port) == ports.end()) {
        ports.push_back(port);
      }
    }
    std::vector<std::string> peers;
    for (int i = 0; i < members; ++i) {
      peers.push_back(
          absl::StrCat("m", i, "=http://127.0.0.1:", ports[2 * i + 1]));
    }
    std::vector<Member> cluster(members);
    for (int i = 0; i < members; ++i) {
      const std::string client_url =
          absl::StrCat(scheme, "://127.0.0.1:", ports[2 * i]);
      const std::string peer_url =
          absl::StrCat("http://127.0.0.1:", ports[2 * i + 1]);
      cluster[i].client_port = ports[2 * i];
      cluster[i].argv = {
          kEtcdBinary,
          absl::StrCat("--name=m", i),
          absl::StrCat("--data-dir=", data_dir, "/attempt-", attempt, "/m", i),
          "--listen-client-urls=" + client_url,
          "--advertise-client-urls=" + client_url,
          "--listen-peer-urls=" + peer_url,
          "--initial-advertise-peer-urls=" + peer_url,
          "--initial-cluster=" + absl::StrJoin(peers, ","),
          "--initial-cluster-state=new"};
      cluster[i].argv.insert(cluster[i].argv.end(), flags.begin(), flags.end());
      if (!tls_dir.empty()) {
        cluster[i].argv.insert(
            cluster[i].argv.end(),
            {"--cert-file=" + tls_dir + "/server.pem",
             "--key-file=" + tls_dir + "/server.key",
             "--trusted-ca-file=" + tls_dir + "/ca.pem", "--client-cert-auth"});
      }
      Launch(cluster[i]);
    }
    auto server =
        std::unique_ptr<EtcdServer>(new EtcdServer(std::move(cluster)));
    absl::Status up = server->Restart();
    if (up.ok()) return server;
    failure = std::string(up.message());
  }
  return absl::InternalError(
      absl::StrCat("etcd did not start (", failure, ")"));
}

EtcdServer::~EtcdServer() { Kill(); }

absl::Status EtcdServer::Restart() {
  for (Member& m : members_) {
    if (m.process == nullptr) Launch(m);
  }
  for (Member& m : members_) {
    Process& p = *m.process;
    const bool ended = WaitUntil([&] { return !p.Running() || Serving(p); },
                                 absl::Seconds(60));
    if (!ended || !p.Running()) {
      const std::string why = absl::StrCat(
          m.argv[1], ": ", ended ? absl::StrCat("exit ", p.Wait()) : "no start",
          ": ", p.Stderr());
      Kill();
      return absl::InternalError(why);
    }
  }
  return absl::OkStatus();
}

std::string EtcdServer::endpoint() const {
  std::vector<std::string> endpoints;
  for (const Member& m : members_) {
    endpoints.push_back(absl::StrCat("127.0.0.1:", m.client_port));
  }
  return absl::StrJoin(endpoints, ",");
}

void EtcdServer::KillMember(int i) {
  Member& m = members_[i];
  if (m.process == nullptr) return;
  m.process->Signal(SIGKILL);
  m.process->Wait();
  m.process = nullptr;
}

void EtcdServer::Kill() {
  for (size_t i = 0; i < members_.size(); ++i) KillMember(i);
}

}  // namespace neffd::test_support
