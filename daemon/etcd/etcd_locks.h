// daemon/etcd/etcd_locks.h
//
// EtcdLocks are the cross-host holds of a lease when neffd coordinates on
// etcd (`--coordinator=etcd://...`, docs/ARCHITECTURE.md "Coordination on
// etcd"). They replace the filesystem protocol's polling, not its files:
//
//   - Taking a key: one etcd Txn creates {prefix}{canonical key} under this
//     daemon's one etcd lease (TTL `lease_ttl`, kept alive by a thread of
//     the Env), then the `fenced` file locks take the local flock and the
//     key's lease file on the store, marked as an etcd holder's. Releasing:
//     the file first, then the etcd key (deleted only if it is still the
//     one this daemon created). A SIGKILLed daemon's keys vanish when its
//     etcd lease expires; the next holder breaks its marked lease file at
//     once (holding the etcd key proves that hold ended).
//   - Waiting: a key held elsewhere is watched, not polled. One watch
//     stream per daemon on the prefix (deletes only) wakes the LockTable's
//     waiters of a key when its etcd key goes (a publish, a release, a dead
//     holder); they then look for the entry once and try once to take it.
//   - Degrade, never fail: when an etcd call fails (unreachable, no quorum,
//     a timeout) new takes go to the `fallback` (the filesystem protocol,
//     polling) and the switch is logged and counted; etcd is tried again
//     every `retry_interval` and used again once it answers. No key is
//     compiled twice across a switch because every etcd holder also holds
//     the key's lease file, which a host on the filesystem protocol
//     respects; a key whose lease file a filesystem-protocol host holds is
//     not taken through etcd either (its etcd key is dropped again and the
//     key polled).
//
// Start returns once the watch is up (or after `retry_interval`).
// Thread-safe. The destructor stops the threads and revokes the etcd lease,
// so this daemon's keys go at once.
#ifndef NEFFD_DAEMON_ETCD_ETCD_LOCKS_H_
#define NEFFD_DAEMON_ETCD_ETCD_LOCKS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/etcd/etcd_client.h"
#include "daemon/locks/lock_table.h"
#include "store/entry_id.h"
#include "store/env.h"

namespace neffd::etcd {

struct EtcdLocksOptions {
  EtcdClient* client = nullptr;  // not owned
  // Where the lease keys live: {prefix}{EntryKey::Canonical()}.
  std::string prefix = "/neffd/v1/lease/";
  std::string host_id;
  // The TTL of this daemon's etcd lease: how long after a SIGKILL its keys
  // are handed on. etcd grants at least its minimum (2 s at its default
  // timing); the lease is kept alive every third of what it granted.
  absl::Duration lease_ttl = absl::Seconds(1);
  // While etcd fails, how often it is tried again.
  absl::Duration retry_interval = absl::Seconds(2);
  // File locks with FileLocksOptions::etcd_fenced, for holders through
  // etcd; and the plain filesystem protocol, for the fallback. Not owned.
  ExternalLocks* fenced = nullptr;
  ExternalLocks* fallback = nullptr;
  // The clock and the threads; not owned.
  Env* env = Env::Default();
};

// For stats, metrics and logs.
struct CoordinatorState {
  bool etcd_healthy = true;     // new keys go through etcd
  bool watching = false;        // the watch stream is up
  int64_t lease_id = 0;         // this daemon's etcd lease (0: none yet)
  absl::Duration granted_ttl;   // its TTL as etcd granted it
  uint64_t fallbacks = 0;       // switches to the filesystem protocol
  uint64_t recoveries = 0;      // switches back to etcd
  uint64_t etcd_takes = 0;      // keys taken through etcd
  uint64_t fallback_takes = 0;  // take attempts on the filesystem protocol
  uint64_t watch_wakeups = 0;   // waits woken by a watched release
  uint64_t lease_losses = 0;    // this daemon's etcd lease expired
  uint64_t watch_restarts = 0;  // the watch stream broke and was reopened
  std::string last_error;
};

// A cross-host holder as etcd knows it (`neffctl locks`).
struct EtcdHolder {
  std::string canonical;  // the entry's key (EntryKey::Canonical())
  std::string host;
  int64_t pid = 0;
  int64_t etcd_lease = 0;
};

class EtcdLocks : public ExternalLocks {
 public:
  // InvalidArgument without a client or the two file locks.
  static absl::StatusOr<std::unique_ptr<EtcdLocks>> Start(
      EtcdLocksOptions options);
  ~EtcdLocks() override;

  std::unique_ptr<ExternalLock> TryTake(const EntryKey& id,
                                        const std::string& lease_id) override;
  std::unique_ptr<ExternalLock> TryTakeOrWatch(const EntryKey& id,
                                               const std::string& lease_id,
                                               std::function<void()> wake,
                                               bool* watching) override;

  CoordinatorState state() const;
  // Every key held through etcd, by any host; an error if etcd does not
  // answer.
  absl::StatusOr<std::vector<EtcdHolder>> Holders();

  class Impl;

 private:
  explicit EtcdLocks(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace neffd::etcd

#endif  // NEFFD_DAEMON_ETCD_ETCD_LOCKS_H_
