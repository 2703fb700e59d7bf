#include "store/lock_paths.h"

#include <fcntl.h>

#include "absl/strings/str_cat.h"

namespace neffd {

std::string LockFilePath(const std::string &locks_dir, const EntryKey &id) {
  return absl::StrCat(locks_dir, "/", NamespaceName(id.ns()), "/",
                      id.compiler_version(), "/", id.key(), ".lock");
}

absl::StatusOr<UniqueFd> OpenLockFile(const std::string &locks_dir,
                                      const EntryKey &id, Env *env) {
  const std::string path = LockFilePath(locks_dir, id);
  // O_NONBLOCK: a FIFO planted in the lock directory must not block the open.
  constexpr int kFlags = O_CREAT | O_RDWR | O_NOFOLLOW | O_NONBLOCK;
  absl::StatusOr<UniqueFd> fd = env->Open(path, kFlags, 0664);
  if (absl::IsNotFound(fd.status())) {
    if (absl::Status s = MakeDirs(path.substr(0, path.rfind('/')), 0775, env);
        !s.ok()) {
      return s;
    }
    fd = env->Open(path, kFlags, 0664);
  }
  return fd;
}

}  // namespace neffd
