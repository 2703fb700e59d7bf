// daemon/server/peer_credentials.h
//
// Who is at the other end of a call on one of neffd's unix sockets, in the
// kernel's word (SO_PEERCRED: uid, gid and pid of the process that
// connected), not the client's. gRPC 1.51 has no API for it, so the daemon
// accepts unix connections itself (UnixListener, daemon/server/listeners.h)
// and hands each descriptor to its server (grpc::AddInsecureChannelFromFd);
// gRPC then names the peer of every call on that connection "fd:N", which
// PeerRegistry maps back to the credentials read at accept time.
//
// Used to log who did what, to refuse inline publishes from users outside
// the ranks' group, and for holder liveness (a local holder's pid is the
// connection's, whatever the request claims). Calls over TCP have no
// credentials (nullopt): loopback TCP is open to every local user, and
// remote ones are authenticated by their TLS certificate.
//
// Limit: gRPC closes a connection's descriptor without telling the
// registry, so a number is reused by the next accepted connection; a call
// still running when its connection closed and a new one was accepted in
// that instant would read the new connection's credentials. Handlers read
// them once, when the call starts.
//
// Thread-safe.
#ifndef NEFFD_DAEMON_SERVER_PEER_CREDENTIALS_H_
#define NEFFD_DAEMON_SERVER_PEER_CREDENTIALS_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"

namespace neffd {

struct PeerCredentials {
  uid_t uid = 0;
  gid_t gid = 0;
  pid_t pid = 0;
};

// "uid=1001 gid=1001 pid=4242", for logs.
std::string DescribePeer(const std::optional<PeerCredentials>& peer);

class PeerRegistry {
 public:
  // The connection on `fd` was accepted from `peer` (replaces what a closed
  // connection with the same number left).
  void Add(int fd, const PeerCredentials& peer);
  // The credentials of a call whose ServerContext::peer() is `grpc_peer`;
  // nullopt for anything but a connection this registry accepted.
  std::optional<PeerCredentials> Find(absl::string_view grpc_peer) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, PeerCredentials> by_fd_ ABSL_GUARDED_BY(mu_);
};

// SO_PEERCRED of the connected unix socket `fd`.
std::optional<PeerCredentials> ReadPeerCredentials(int fd);

// True if `uid` is root, `service_uid`, or (by its primary or supplementary
// groups) a member of the group `group` (false if that group does not
// exist).
bool UidInGroup(uid_t uid, uid_t service_uid, const std::string& group);

}  // namespace neffd

#endif  // NEFFD_DAEMON_SERVER_PEER_CREDENTIALS_H_
