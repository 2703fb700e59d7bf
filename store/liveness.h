// store/liveness.h
//
// Liveness tells the LockTable whether the process holding a lease still
// exists, so a holder that dies is replaced at once rather than after its TTL.
// A holder is observed once, when it is granted: Observe returns a token for
// that incarnation of the process (its start time), and IsAlive is false once
// the process is gone, a zombie, or its pid was reused by another process.
// Holders the daemon cannot see (another host, another pid namespace) are not
// observable and fall back to the lease TTL.
//
// Implementations must be thread-safe.
#ifndef NEFFD_STORE_LIVENESS_H_
#define NEFFD_STORE_LIVENESS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

namespace neffd {

struct HolderInfo {
  std::string host;
  int64_t pid = 0;
  int64_t rank = -1;
};

class Liveness {
 public:
  virtual ~Liveness() = default;
  // A token for the holder's current process, or nullopt if not observable.
  virtual std::optional<uint64_t> Observe(const HolderInfo& holder) = 0;
  virtual bool IsAlive(const HolderInfo& holder, uint64_t token) = 0;
};

// Reads /proc/{pid}/stat for holders whose host is `local_host_id`.
std::unique_ptr<Liveness> NewProcLiveness(std::string local_host_id);

// True if no process `pid` runs in this pid namespace any more, including one
// that has exited but is not yet reaped by its parent (a zombie, which
// kill(pid, 0) still reports as running).
bool ProcessIsGone(int64_t pid);

}  // namespace neffd

#endif  // NEFFD_STORE_LIVENESS_H_
