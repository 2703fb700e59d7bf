#include "client/file_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace neffd {

absl::StatusOr<FileLock> FileLock::Acquire(UniqueFd fd, absl::Time deadline,
                                           Env* env) {
  absl::Duration backoff = absl::Milliseconds(1);
  for (;;) {
    if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return FileLock(std::move(fd));
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return absl::ErrnoToStatus(errno, "flock");
    const absl::Time now = env->Now();
    if (now >= deadline) return FileLock();
    env->SleepFor(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, absl::Milliseconds(50));
  }
}

absl::StatusOr<FileLock> LockEntry(const std::string& locks_dir,
                                   const EntryKey& id, absl::Time deadline,
                                   Env* env) {
  absl::StatusOr<UniqueFd> fd = OpenLockFile(locks_dir, id);
  if (!fd.ok()) return fd.status();
  return FileLock::Acquire(*std::move(fd), deadline, env);
}

}  // namespace neffd
