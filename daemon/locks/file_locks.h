// daemon/locks/file_locks.h
//
// FileLocks are the holds a lease keeps outside the daemon
// (docs/ARCHITECTURE.md, "Cross-host leases"):
//
//  1. Node-local: an exclusive flock on
//     {locks_dir}/{ns}/{compiler_version}/{key}.lock, the same file the
//     client's fallback mode locks, so daemon users and daemon-less processes
//     on this host exclude each other.
//  2. Cross-host (when `shared` is set): the entry's lease file on the shared
//     store, {entry_dir}/neffd.lease, created with O_EXCL and
//     holding "host pid lease-id unix-ms". Its mtime is refreshed (every
//     TTL/3) while the lease lives. Another host's lease file is stale when
//     this daemon has watched it stay unchanged (same inode, same mtime) for
//     `stale_after` minus one poll interval, measured on this host's
//     monotonic clock. No wall clock is ever compared across hosts: on
//     filesystems where clients set mtimes (Lustre), a skewed host writes
//     skewed mtimes, so "mtime vs. the filesystem's now" would break live
//     leases or keep dead ones; watching for change cannot. A lease file
//     written by an earlier incarnation of this host's daemon whose process
//     is gone is stale at once. Breaking is race-free: rename to a unique
//     name, check that the renamed file is the one judged stale, then unlink;
//     only the renamer proceeds. Anyone who can write the store can plant a
//     file there: a lease file that is not a regular file (a FIFO, a socket,
//     a symlink, a directory) or is larger than a lease record is broken at
//     once, and one that is not a lease record (a foreign file) once it has
//     stayed unchanged as long as a stale lease; both are moved to
//     `quarantine_dir` rather than deleted, so an operator can see what was
//     there. No open of a lease file ever blocks (store/file_util.h
//     OpenRegularFile).
//
// Thread-safe.
#ifndef NEFFD_DAEMON_LOCKS_FILE_LOCKS_H_
#define NEFFD_DAEMON_LOCKS_FILE_LOCKS_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "daemon/locks/lock_table.h"
#include "store/entry_id.h"
#include "store/env.h"
#include "store/lock_paths.h"
#include "store/store.h"

namespace neffd {

struct FileLocksOptions {
  std::string locks_dir;  // {TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR}/locks
  bool shared = true;     // also take cross-host lease files
  std::string host_id;
  absl::Duration stale_after = absl::Seconds(30);
  // The LockTable's poll interval: how often TryTake is retried per key.
  absl::Duration poll_interval = absl::Seconds(1);
  // The entry's directory on the shared store.
  std::function<std::string(const EntryKey&)> entry_dir;
  // Where planted and foreign lease files are moved (empty: deleted).
  std::function<std::string(const EntryKey&)> quarantine_dir;
  // The lease file's name in that directory. The store-wide gc lease
  // (daemon/cluster/gc_coordinator.h) reuses this protocol under its own name.
  std::string lease_file_name = kLeaseFileName;
  // For etcd coordination (daemon/etcd/etcd_locks.h), whose holder takes a
  // key's lease file only while it holds the key in etcd: records are
  // written with the lease id as "etcd:{lease-id}", and another holder's
  // such record is broken at once, since this holder's etcd key proves
  // that holder's etcd hold has ended. A record without the mark (a host
  // on the filesystem protocol) is judged as always. The file stays the
  // fence that keeps a host that has fallen back to the filesystem
  // protocol from taking a key an etcd holder is compiling.
  bool etcd_fenced = false;
  // The host's filesystem (the lock files) and clock; not owned.
  Env* env = Env::Default();
  // The shared store's filesystem (the lease files); not owned. The daemon
  // passes a CountingEnv to count its metadata operations.
  Env* shared_env = Env::Default();
};

std::unique_ptr<ExternalLocks> NewFileLocks(FileLocksOptions options);

}  // namespace neffd

#endif  // NEFFD_DAEMON_LOCKS_FILE_LOCKS_H_
