// client/daemon_channel.h
//
// How every client reaches neffd: the address comes from the caller, else
// NEFFD_ADDRESS through the config registry, else the default socket
// unix:/run/neffd/neffd.sock. Calls fail fast (no wait-for-ready), so an
// absent daemon shows up as UNAVAILABLE at once and callers can fall back.
//
// A unix socket is always plaintext (its mode and group are the access
// control); a TCP address outside loopback is served by neffd only with
// mutual TLS, so a client dialling one gives ClientTls: its own certificate
// and key, and the CA that signed the daemon's (whose certificate must name
// the host the client dials).
//
// Thread-safe.
#ifndef NEFFD_CLIENT_DAEMON_CHANNEL_H_
#define NEFFD_CLIENT_DAEMON_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "grpcpp/channel.h"
#include "grpcpp/client_context.h"
#include "grpcpp/security/credentials.h"
#include "proto/call_deadline.h"

namespace neffd {

// PEM files for mutual TLS to a TCP address; all three or none.
struct ClientTls {
  std::string cert;  // this client's certificate chain
  std::string key;   // its private key
  std::string ca;    // the CA that signed the daemon's certificate
  bool any() const { return !cert.empty() || !key.empty() || !ca.empty(); }
};

// `address` if non-empty, else $NEFFD_ADDRESS, else the default socket.
std::string ResolveDaemonAddress(const std::string& address);

// The operators' socket: `address` if non-empty, else $NEFFD_ADMIN_ADDRESS,
// else unix:/run/neffd/admin.sock.
std::string ResolveAdminAddress(const std::string& address);

// OK if every file `tls` names can be read (a set need not be whole here);
// else InvalidArgument "tls_ca: cannot read PATH: why" for the first that
// cannot (tls_cert, tls_key, tls_ca: the C ABI's and Python's names).
absl::Status CheckTlsFiles(const ClientTls& tls);

// Insecure credentials without TLS files; with all three, mutual TLS.
// InvalidArgument naming the option for half a set or an unreadable file.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> CredentialsFor(
    const ClientTls& tls);

// A channel to the daemon at ResolveDaemonAddress(address), with
// `credentials` for TCP (nullptr: plaintext); a unix socket is always
// plaintext.
std::shared_ptr<grpc::Channel> ConnectToDaemon(
    const std::string& address,
    std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

}  // namespace neffd

#endif  // NEFFD_CLIENT_DAEMON_CHANNEL_H_
