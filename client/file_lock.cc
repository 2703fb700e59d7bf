#include "client/file_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace neffd {

Clock RealClock() {
  return Clock{[] { return absl::Now(); },
               [](absl::Duration d) { absl::SleepFor(d); }};
}

absl::StatusOr<FileLock> FileLock::Acquire(UniqueFd fd, absl::Time deadline,
                                           const Clock& clock) {
  absl::Duration backoff = absl::Milliseconds(1);
  for (;;) {
    if (flock(fd.get(), LOCK_EX | LOCK_NB) == 0) return FileLock(std::move(fd));
    if (errno == EINTR) continue;
    if (errno != EWOULDBLOCK) return ErrnoStatus(errno, "flock");
    const absl::Time now = clock.now();
    if (now >= deadline) return FileLock();
    clock.sleep(std::min(backoff, deadline - now));
    backoff = std::min(backoff * 2, absl::Milliseconds(50));
  }
}

std::string LockFilePath(const std::string& locks_dir, const EntryKey& id) {
  return absl::StrCat(locks_dir, "/", NamespaceName(id.ns()), "/",
                      id.compiler_version(), "/", id.key(), ".lock");
}

absl::StatusOr<FileLock> LockEntry(const std::string& locks_dir,
                                   const EntryKey& id, absl::Time deadline,
                                   const Clock& clock) {
  const std::string path = LockFilePath(locks_dir, id);
  constexpr int kFlags = O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW;
  UniqueFd fd(open(path.c_str(), kFlags, 0664));
  if (!fd.valid() && errno == ENOENT) {
    if (absl::Status s = MakeDirs(path.substr(0, path.rfind('/')), 0775);
        !s.ok()) {
      return s;
    }
    fd = UniqueFd(open(path.c_str(), kFlags, 0664));
  }
  if (!fd.valid()) return ErrnoStatus(errno, "opening lock file " + path);
  return FileLock::Acquire(std::move(fd), deadline, clock);
}

}  // namespace neffd
