#include "store/lock_paths.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace neffd {
namespace {

constexpr int kLockFileMode = 0660;

// The error of a lock directory this process cannot use: the key cannot be
// locked, which callers must not mistake for "held elsewhere".
absl::Status Unusable(const std::string& locks_dir, const absl::Status& s) {
  return absl::Status(
      s.code(),
      absl::StrCat("lock directory ", locks_dir, " is unusable (", s.message(),
                   "): it must be group-writable by the daemon's group "
                   "(mode 2770); no lock can be taken"));
}

}  // namespace

bool IsLockFileName(absl::string_view name) {
  return name == kLeaseFileName || absl::EndsWith(name, ".lock");
}

std::string LockFilePath(const std::string& locks_dir, const EntryKey& id) {
  if (id.ns() == Namespace::kNeff) {
    return absl::StrCat(locks_dir, "/", id.key(), ".lock");
  }
  return absl::StrCat(locks_dir, "/", NamespaceName(id.ns()), "/", id.key(),
                      ".lock");
}

absl::StatusOr<UniqueFd> OpenLockFile(const std::string& locks_dir,
                                      const EntryKey& id, Env* env) {
  const std::string path = LockFilePath(locks_dir, id);
  // O_NONBLOCK: a FIFO planted in the lock directory must not block the open.
  constexpr int kFlags =
      O_CREAT | O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC;
  absl::StatusOr<UniqueFd> fd = env->Open(path, kFlags, kLockFileMode);
  if (absl::IsNotFound(fd.status())) {
    if (absl::Status s =
            MakeGroupDirs(path.substr(0, path.rfind('/')), kLocalDirMode, env);
        !s.ok()) {
      return Unusable(locks_dir, s);
    }
    fd = env->Open(path, kFlags, kLockFileMode);
  }
  if (!fd.ok()) return Unusable(locks_dir, fd.status());
  // The umask may have taken the group's bits off a file made just now.
  struct stat st;
  if (env->Fstat(fd->get(), path, &st).ok() && st.st_uid == geteuid() &&
      (st.st_mode & 0777) != kLockFileMode) {
    (void)env->Chmod(fd->get(), path, kLockFileMode);
  }
  return fd;
}

}  // namespace neffd
