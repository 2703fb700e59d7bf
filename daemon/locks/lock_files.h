// daemon/locks/lock_files.h
//
// The host's lock directory as unmodified TorchNeuron ranks share it (the
// spec page "How an unmodified TorchNeuron rank uses the NEFF cache", "One
// compile per key per host"): such a rank flocks {locks_dir}/{key}.lock, the
// file neffd's leases flock too (store/lock_paths.h), and never deletes it.
// What the daemon adds:
//   - which of those files a process other than the daemon holds now, with
//     the holder's pid from /proc/locks (`neffctl locks`);
//   - the removal of files nobody holds, checked with a non-blocking flock
//     (gc), since TorchNeuron leaves one file per key forever.
//
// Thread-safe (no state).
#ifndef NEFFD_DAEMON_LOCKS_LOCK_FILES_H_
#define NEFFD_DAEMON_LOCKS_LOCK_FILES_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "store/env.h"

namespace neffd {

struct HeldLockFile {
  std::string key;   // the file's name without ".lock"
  std::string path;  // {locks_dir}/{key}.lock
  int64_t pid = 0;   // as /proc/locks gives it (0: not in our pid namespace)
};

// The {locks_dir}/*.lock files that a process other than `self` holds an
// exclusive flock on, matched to /proc/locks (`proc_locks`) by device and
// inode. Sorted by key.
absl::StatusOr<std::vector<HeldLockFile>> HeldLockFiles(
    const std::string& locks_dir, Env* env, pid_t self,
    const std::string& proc_locks = "/proc/locks");

// Removes each {locks_dir}/*.lock that nobody holds: a non-blocking flock
// of it succeeds, and the file is unlinked while that flock is held. Returns
// how many it removed. A rank that opened the file before the unlink and
// locks it after locks a file no one else will open: at worst that key is
// compiled twice on this host, as after TorchNeuron's own lock-timeout
// recovery (which deletes and recreates the file); never a torn entry.
uint64_t RemoveUnheldLockFiles(const std::string& locks_dir, Env* env);

}  // namespace neffd

#endif  // NEFFD_DAEMON_LOCKS_LOCK_FILES_H_
