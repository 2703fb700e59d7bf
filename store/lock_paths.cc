#include "store/lock_paths.h"

#include <errno.h>
#include <fcntl.h>

#include "absl/strings/str_cat.h"

namespace neffd {

std::string LockFilePath(const std::string &locks_dir, const EntryKey &id) {
  return absl::StrCat(locks_dir, "/", NamespaceName(id.ns()), "/",
                      id.compiler_version(), "/", id.key(), ".lock");
}

absl::StatusOr<UniqueFd> OpenLockFile(const std::string &locks_dir,
                                      const EntryKey &id) {
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
  if (!fd.valid())
    return absl::ErrnoToStatus(errno, "opening lock file " + path);
  return fd;
}

}  // namespace neffd
