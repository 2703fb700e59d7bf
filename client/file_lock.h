// client/file_lock.h
//
// Exclusive flock(2) locks for the client's fallback mode and compile
// directories. A FileLock owns the descriptor
// that holds the lock; the kernel drops the lock when the descriptor is
// closed, including when the process dies, so a killed holder never wedges a
// key. Waiting is polling with a back-off (1 ms doubling to 50 ms) on the
// given Env's clock, so tests can bound it.
//
// The lock file is the one the daemon locks for its leases
// (store/lock_paths.h), so the daemon and daemon-less processes exclude each
// other.
//
// Thread-safe functions; a FileLock is a move-only value.
#ifndef NEFFD_CLIENT_FILE_LOCK_H_
#define NEFFD_CLIENT_FILE_LOCK_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "store/entry_id.h"
#include "store/env.h"
#include "store/file_util.h"
#include "store/lock_paths.h"

namespace neffd {

class FileLock {
 public:
  FileLock() = default;
  FileLock(FileLock&&) = default;
  FileLock& operator=(FileLock&&) = default;

  bool held() const { return fd_.valid(); }
  int fd() const { return fd_.get(); }
  // Drops the lock (and closes the descriptor).
  void Release() { fd_ = UniqueFd(); }

  // Takes the lock on the open descriptor `fd`, polling until `deadline`
  // (absl::InfinitePast: one try). Returns a held lock, or an unheld one if
  // the deadline passed with the lock held elsewhere.
  static absl::StatusOr<FileLock> Acquire(UniqueFd fd, absl::Time deadline,
                                          Env* env);

 private:
  explicit FileLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

// Opens (creating it and its directories) the lock file of `id` and locks it
// as FileLock::Acquire does.
absl::StatusOr<FileLock> LockEntry(const std::string& locks_dir,
                                   const EntryKey& id, absl::Time deadline,
                                   Env* env);

}  // namespace neffd

#endif  // NEFFD_CLIENT_FILE_LOCK_H_
