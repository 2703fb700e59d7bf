#include "daemon/server/listeners.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "grpcpp/server_posix.h"
#include "store/file_util.h"

namespace neffd {
namespace {

// True if something accepts connections on the unix socket `path`.
bool SocketIsLive(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  bool live =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return live;
}

bool IsLoopback(const std::string& address) {
  const std::string host = address.substr(0, address.rfind(':'));
  return host == "localhost" || host == "[::1]" ||
         absl::StartsWith(host, "127.");
}

}  // namespace

std::string UnixPath(absl::string_view address) {
  return absl::StartsWith(address, "unix:") ? std::string(address.substr(5))
                                            : "";
}

absl::Status ValidateAddress(const std::string& address, bool tls,
                             absl::string_view flag) {
  if (absl::StartsWith(address, "unix:")) {
    std::string path = UnixPath(address);
    if (path.empty() || path[0] != '/') {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " ", address, ": a unix socket needs an absolute path"));
    }
    if (path.size() >= sizeof(sockaddr_un::sun_path)) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " ", address, ": socket path is too long"));
    }
    return absl::OkStatus();
  }
  size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos ||
      !absl::SimpleAtoi(address.substr(colon + 1), &port) || port < 0 ||
      port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, " ", address, ": expected unix:/path or a loopback HOST:PORT"));
  }
  if (IsLoopback(address) || (tls && colon > 0)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      flag, " ", address,
      ": TCP is served only on loopback (127.0.0.1, localhost, [::1]) unless "
      "--tls_cert, --tls_key and --tls_client_ca are given (mutual TLS); use "
      "a unix socket for anything else"));
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> CredentialsFor(
    const std::string& address, const TlsFiles& tls, absl::string_view flag) {
  if (absl::Status s = ValidateAddress(address, tls.any(), flag); !s.ok()) {
    return s;
  }
  // A unix socket is guarded by its mode and group; TLS is for TCP.
  if (!tls.any() || !UnixPath(address).empty()) {
    return grpc::InsecureServerCredentials();
  }
  if (tls.cert.empty() || tls.key.empty() || tls.client_ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert, --tls_key and --tls_client_ca go together (mutual TLS: "
        "clients need a certificate signed by --tls_client_ca); give all "
        "three or none");
  }
  // Without a client certificate signed by the CA the handshake fails: the
  // port is access-controlled, not only encrypted.
  grpc::SslServerCredentialsOptions ssl(
      GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  if (absl::Status s = ReadOptionFiles(
          {{"--tls_cert", &tls.cert, &pair.cert_chain},
           {"--tls_key", &tls.key, &pair.private_key},
           {"--tls_client_ca", &tls.client_ca, &ssl.pem_root_certs}});
      !s.ok()) {
    return s;
  }
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  return grpc::SslServerCredentials(ssl);
}

absl::Status PrepareSocketPath(const std::string& address) {
  const std::string socket_path = UnixPath(address);
  if (socket_path.empty()) return absl::OkStatus();
  size_t slash = socket_path.rfind('/');
  if (slash > 0) {
    if (absl::Status s = MakeDirs(socket_path.substr(0, slash)); !s.ok()) {
      return s;
    }
  }
  if (SocketIsLive(socket_path)) {
    return absl::AlreadyExistsError(
        absl::StrCat("another neffd is already listening on ", socket_path));
  }
  return absl::OkStatus();
}

absl::Status RestrictToGroup(const std::string& path, mode_t mode,
                             const std::string& group, bool group_required,
                             absl::string_view flag) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("stat ", path));
  }
  if (st.st_uid != geteuid() && geteuid() != 0) {
    if ((st.st_mode & 07) == 0) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        path, " belongs to uid ", st.st_uid,
        " and is open to other users; remove it or chmod o-rwx it"));
  }
  if (!group.empty()) {
    struct group* g = getgrnam(group.c_str());
    if (g == nullptr && group_required) {
      return absl::InvalidArgumentError(
          absl::StrCat(flag, " ", group, ": no such group"));
    }
    if (g != nullptr && chown(path.c_str(), -1, g->gr_gid) != 0) {
      return absl::ErrnoToStatus(
          errno, absl::StrCat("chown ", path, " to group ", group, " (", flag,
                              "): the service user must be a member"));
    }
  }
  // After chown, which may clear the setgid bit.
  if (chmod(path.c_str(), mode) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("chmod ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<UnixListener>> UnixListener::Listen(
    Options options) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return absl::ErrnoToStatus(errno, "socket");
  std::unique_ptr<UnixListener> listener(new UnixListener(options, fd));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  options.path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  // PrepareSocketPath made sure nothing live listens here.
  unlink(options.path.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("cannot listen on ", options.path));
  }
  if (absl::Status s =
          RestrictToGroup(options.path, options.mode, options.group,
                          options.group_required, options.group_flag);
      !s.ok()) {
    return s;
  }
  if (listen(fd, SOMAXCONN) != 0) {
    return absl::ErrnoToStatus(errno,
                               absl::StrCat("cannot listen on ", options.path));
  }
  return listener;
}

UnixListener::~UnixListener() {
  stopping_ = true;
  // Wakes the accept loop's poll (POLLHUP) rather than waiting out its
  // timeout: a shutdown should not cost 100 ms per socket.
  shutdown(fd_, SHUT_RDWR);
  acceptor_.Join();
  close(fd_);
  unlink(options_.path.c_str());
}

void UnixListener::Serve(grpc::Server* server) {
  acceptor_ = options_.env->StartThread("neffd-accept",
                                        [this, server] { AcceptLoop(server); });
}

void UnixListener::AcceptLoop(grpc::Server* server) {
  pollfd ready{fd_, POLLIN, 0};
  while (!stopping_) {
    // A short poll so that the destructor never waits long for this thread.
    if (poll(&ready, 1, 100) <= 0 || stopping_) continue;
    const int client =
        accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (client < 0) {
      // Out of descriptors: the connection waits in the backlog meanwhile.
      if (errno == EMFILE || errno == ENFILE) usleep(10000);
      continue;
    }
    std::optional<PeerCredentials> peer = ReadPeerCredentials(client);
    if (!peer.has_value()) {
      close(client);
      continue;
    }
    options_.peers->Add(client, *peer);
    grpc::AddInsecureChannelFromFd(server, client);
  }
}

}  // namespace neffd
