#include "daemon/server/peer_credentials.h"

#include <grp.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace neffd {

std::string DescribePeer(const std::optional<PeerCredentials>& peer) {
  if (!peer.has_value()) return "tcp";
  return absl::StrCat("uid=", peer->uid, " gid=", peer->gid,
                      " pid=", peer->pid);
}

void PeerRegistry::Add(int fd, const PeerCredentials& peer) {
  absl::MutexLock lock(&mu_);
  by_fd_[fd] = peer;
}

std::optional<PeerCredentials> PeerRegistry::Find(
    absl::string_view grpc_peer) const {
  int fd = -1;
  if (!absl::ConsumePrefix(&grpc_peer, "fd:") ||
      !absl::SimpleAtoi(grpc_peer, &fd)) {
    return std::nullopt;
  }
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  return it->second;
}

std::optional<PeerCredentials> ReadPeerCredentials(int fd) {
  struct ucred cred;
  socklen_t size = sizeof(cred);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &size) != 0) {
    return std::nullopt;
  }
  return PeerCredentials{cred.uid, cred.gid, cred.pid};
}

bool UidInGroup(uid_t uid, uid_t service_uid, const std::string& group) {
  if (uid == 0 || uid == service_uid) return true;
  // The reentrant lookups: this runs on gRPC's threads.
  std::vector<char> buffer(16384);
  struct group gr;
  struct group* group_found = nullptr;
  if (getgrnam_r(group.c_str(), &gr, buffer.data(), buffer.size(),
                 &group_found) != 0 ||
      group_found == nullptr) {
    return false;
  }
  const gid_t wanted = gr.gr_gid;
  struct passwd pw;
  struct passwd* found = nullptr;
  if (getpwuid_r(uid, &pw, buffer.data(), buffer.size(), &found) != 0 ||
      found == nullptr) {
    return false;
  }
  if (pw.pw_gid == wanted) return true;
  int count = 64;
  std::vector<gid_t> groups(count);
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) {
    groups.resize(count);
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &count) < 0) {
      return false;
    }
  }
  groups.resize(count);
  for (gid_t gid : groups) {
    if (gid == wanted) return true;
  }
  return false;
}

}  // namespace neffd
