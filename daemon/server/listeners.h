// daemon/server/listeners.h
//
// Where neffd listens and who may connect (docs/SECURITY.md). The daemon
// serves two addresses:
//
//   - the ranks' socket (--address): CompileCache and the read-only operator
//     calls; a unix socket 0660 in the ranks' group (--socket_group);
//   - the admin socket (--admin_address): every operator call; a unix
//     socket 0600 owned by the service user, or 0660 in --admin_group.
//
// Either may instead be TCP: on loopback without TLS, anywhere else only
// with mutual TLS (--tls_cert, --tls_key and --tls_client_ca: the client
// must present a certificate signed by that CA).
//
// ValidateAddress and CredentialsFor are the start-up checks (each error
// names the flag); PrepareSocketPath refuses to take over a socket another
// daemon is listening on; RestrictSocket sets a created socket's mode and
// group. Thread-compatible (start-up only).
#ifndef NEFFD_DAEMON_SERVER_LISTENERS_H_
#define NEFFD_DAEMON_SERVER_LISTENERS_H_

#include <atomic>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/server/peer_credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "store/env.h"

namespace neffd {

// PEM files for TCP outside loopback; all three or none.
struct TlsFiles {
  std::string cert;       // --tls_cert: the server's certificate chain
  std::string key;        // --tls_key
  std::string client_ca;  // --tls_client_ca: CA that signs client certs
  bool any() const {
    return !cert.empty() || !key.empty() || !client_ca.empty();
  }
};

// The path of "unix:/path", else "".
std::string UnixPath(absl::string_view address);

// InvalidArgument naming `flag` unless `address` is a unix socket path,
// loopback TCP, or (only with `tls`) any HOST:PORT.
absl::Status ValidateAddress(const std::string& address, bool tls = false,
                             absl::string_view flag = "--address");

// Insecure credentials for a unix socket, or loopback TCP without TLS
// files; for TCP with them, gRPC SSL credentials that require and verify a
// client certificate. InvalidArgument naming the flag for half a set of
// files, a file that cannot be read, or a non-loopback address without TLS.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> CredentialsFor(
    const std::string& address, const TlsFiles& tls, absl::string_view flag);

// For a unix address: its directory exists and no live daemon listens on
// it (gRPC unlinks an existing socket file before binding, which must be a
// stale one, not another daemon's). AlreadyExists naming the socket.
absl::Status PrepareSocketPath(const std::string& address);

// Sets the socket or directory at `path` to `group` (when non-empty and it
// exists) and then to exactly `mode`. With `group_required`, a group that
// does not exist is an InvalidArgument naming `flag`. A directory another
// user made (a rank, in fallback mode) is accepted if it already gives
// others nothing; else FailedPrecondition naming it.
absl::Status RestrictToGroup(const std::string& path, mode_t mode,
                             const std::string& group, bool group_required,
                             absl::string_view flag);

// A unix socket the daemon listens on itself, so that it knows who
// connected (daemon/server/peer_credentials.h): bound, given its mode and
// group before listen() (no moment in which anyone else could connect),
// then each accepted connection's SO_PEERCRED is recorded in the registry
// and the descriptor handed to a started gRPC server. Stops accepting and
// removes the socket when destroyed (before the server shuts down).
class UnixListener {
 public:
  struct Options {
    std::string path;
    mode_t mode = 0660;
    std::string group;  // see RestrictToGroup
    bool group_required = false;
    std::string group_flag;
    PeerRegistry* peers = nullptr;  // not owned
    Env* env = Env::Default();      // starts the accepting thread
  };
  // Binds and listens; errors name the socket.
  static absl::StatusOr<std::unique_ptr<UnixListener>> Listen(Options options);
  ~UnixListener();

  // Accepts connections for `server` (started, outliving this) on a thread.
  void Serve(grpc::Server* server);

 private:
  UnixListener(Options options, int fd)
      : options_(std::move(options)), fd_(fd) {}
  void AcceptLoop(grpc::Server* server);

  const Options options_;
  const int fd_;
  std::atomic<bool> stopping_{false};
  EnvThread acceptor_;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_SERVER_LISTENERS_H_
