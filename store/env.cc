#include "store/env.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace neffd {

absl::string_view FsOpName(FsOp op) {
  switch (op) {
    case FsOp::kOpen:
      return "open";
    case FsOp::kStat:
      return "stat";
    case FsOp::kLstat:
      return "lstat";
    case FsOp::kFstat:
      return "fstat";
    case FsOp::kAccess:
      return "access";
    case FsOp::kRename:
      return "rename";
    case FsOp::kLink:
      return "link";
    case FsOp::kUnlink:
      return "unlink";
    case FsOp::kMkdir:
      return "mkdir";
    case FsOp::kRmdir:
      return "rmdir";
    case FsOp::kListDir:
      return "list";
    case FsOp::kWrite:
      return "write";
    case FsOp::kSync:
      return "fsync";
    case FsOp::kSyncDir:
      return "fsync directory";
    case FsOp::kTouch:
      return "touch";
    case FsOp::kChmod:
      return "chmod";
    case FsOp::kLock:
      return "flock";
    case FsOp::kStatFs:
      return "statvfs";
  }
  return "?";
}

absl::Status FsCallError(const FsCall& call, int err) {
  return absl::ErrnoToStatus(
      err, call.target.empty() ? absl::StrCat(FsOpName(call.op), " ", call.path)
                               : absl::StrCat(FsOpName(call.op), " ", call.path,
                                              " to ", call.target));
}

namespace {

// Runs `syscall` again while it fails with EINTR; OK unless it returns -1.
template <typename Syscall>
absl::Status Check(const FsCall& call, Syscall syscall) {
  for (;;) {
    if (syscall() != -1) return absl::OkStatus();
    if (errno != EINTR) return FsCallError(call, errno);
  }
}

class PosixEnv : public Env {
 public:
  absl::StatusOr<UniqueFd> Open(const std::string& path, int flags,
                                mode_t mode) override {
    int fd = -1;
    absl::Status s = Check({FsOp::kOpen, path}, [&] {
      return fd = open(path.c_str(), flags | O_CLOEXEC, mode);
    });
    if (!s.ok()) return s;
    return UniqueFd(fd);
  }

  absl::Status Stat(const std::string& path, struct stat* st) override {
    return Check({FsOp::kStat, path}, [&] { return stat(path.c_str(), st); });
  }

  absl::Status Lstat(const std::string& path, struct stat* st) override {
    return Check({FsOp::kLstat, path}, [&] { return lstat(path.c_str(), st); });
  }

  absl::Status Fstat(int fd, absl::string_view name, struct stat* st) override {
    return Check({FsOp::kFstat, name}, [&] { return fstat(fd, st); });
  }

  absl::Status Access(const std::string& path, int mode) override {
    return Check({FsOp::kAccess, path},
                 [&] { return access(path.c_str(), mode); });
  }

  absl::Status Rename(const std::string& from, const std::string& to) override {
    return Check({FsOp::kRename, from, to},
                 [&] { return rename(from.c_str(), to.c_str()); });
  }

  absl::Status Link(const std::string& from, const std::string& to) override {
    return Check({FsOp::kLink, from, to},
                 [&] { return link(from.c_str(), to.c_str()); });
  }

  absl::Status Unlink(const std::string& path) override {
    return Check({FsOp::kUnlink, path}, [&] { return unlink(path.c_str()); });
  }

  absl::Status Mkdir(const std::string& path, mode_t mode) override {
    return Check({FsOp::kMkdir, path},
                 [&] { return mkdir(path.c_str(), mode); });
  }

  absl::Status Rmdir(const std::string& path) override {
    return Check({FsOp::kRmdir, path}, [&] { return rmdir(path.c_str()); });
  }

  absl::StatusOr<std::vector<std::string>> ListDir(
      const std::string& dir) override {
    DIR* d = opendir(dir.c_str());
    if (d == nullptr) return FsCallError({FsOp::kListDir, dir}, errno);
    std::vector<std::string> names;
    errno = 0;
    while (struct dirent* e = readdir(d)) {
      absl::string_view name = e->d_name;
      if (name != "." && name != "..") names.emplace_back(name);
    }
    const int err = errno;
    closedir(d);
    if (err != 0) return FsCallError({FsOp::kListDir, dir}, err);
    return names;
  }

  absl::Status Write(int fd, absl::string_view name,
                     absl::string_view data) override {
    while (!data.empty()) {
      ssize_t n = 0;
      absl::Status s = Check({FsOp::kWrite, name}, [&] {
        return n = write(fd, data.data(), data.size());
      });
      if (!s.ok()) return s;
      data.remove_prefix(n);
    }
    return absl::OkStatus();
  }

  absl::StatusOr<size_t> CopyRange(int in_fd, int out_fd,
                                   absl::string_view name,
                                   size_t length) override {
    for (;;) {
      const ssize_t n =
          copy_file_range(in_fd, nullptr, out_fd, nullptr, length, 0);
      if (n >= 0) return static_cast<size_t>(n);
      if (errno == EINTR) continue;
      if (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
          errno == EOPNOTSUPP || errno == EBADF) {
        return absl::UnimplementedError(
            absl::StrCat("copy_file_range to ", name, ": ", strerror(errno)));
      }
      return FsCallError({FsOp::kWrite, name}, errno);
    }
  }

  absl::Status Sync(int fd, absl::string_view name) override {
    return Check({FsOp::kSync, name}, [&] { return fsync(fd); });
  }

  absl::Status SyncDir(const std::string& dir) override {
    const FsCall call{FsOp::kSyncDir, dir};
    UniqueFd fd;
    absl::Status s = Check(call, [&] {
      fd = UniqueFd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
      return fd.get();
    });
    if (!s.ok()) return s;
    return Check(call, [&] { return fsync(fd.get()); });
  }

  absl::Status Touch(int fd, absl::string_view name) override {
    return Check({FsOp::kTouch, name}, [&] { return futimens(fd, nullptr); });
  }

  absl::Status Chmod(int fd, absl::string_view name, mode_t mode) override {
    return Check({FsOp::kChmod, name}, [&] { return fchmod(fd, mode); });
  }

  absl::Status TryLock(int fd, absl::string_view name) override {
    return Check({FsOp::kLock, name},
                 [&] { return flock(fd, LOCK_EX | LOCK_NB); });
  }

  absl::Status StatFs(const std::string& path, struct statvfs* out) override {
    return Check({FsOp::kStatFs, path},
                 [&] { return statvfs(path.c_str(), out); });
  }

  absl::StatusOr<int64_t> FilesystemType(const std::string& path) override {
    struct statfs fs;
    if (absl::Status s = Check({FsOp::kStatFs, path},
                               [&] { return statfs(path.c_str(), &fs); });
        !s.ok()) {
      return s;
    }
    return static_cast<int64_t>(fs.f_type);
  }

  absl::Time Now() override { return absl::Now(); }

  absl::Duration MonotonicNow() override {
    return absl::FromChrono(
        std::chrono::steady_clock::now().time_since_epoch());
  }

  void SleepFor(absl::Duration duration) override { absl::SleepFor(duration); }

  EnvThread StartThread(absl::string_view name,
                        std::function<void()> body) override {
    // Linux's limit: 15 bytes and the terminating NUL.
    std::string comm(name.substr(0, 15));
    return EnvThread(
        std::thread([comm = std::move(comm), body = std::move(body)] {
          pthread_setname_np(pthread_self(), comm.c_str());
          body();
        }));
  }
};

}  // namespace

Env* Env::Default() {
  static Env* const env = new PosixEnv;
  return env;
}

absl::StatusOr<UniqueFd> EnvWrapper::Open(const std::string& path, int flags,
                                          mode_t mode) {
  if (absl::Status s = BeforeCall({FsOp::kOpen, path}); !s.ok()) return s;
  return target_->Open(path, flags, mode);
}

absl::Status EnvWrapper::Stat(const std::string& path, struct stat* st) {
  if (absl::Status s = BeforeCall({FsOp::kStat, path}); !s.ok()) return s;
  return target_->Stat(path, st);
}

absl::Status EnvWrapper::Lstat(const std::string& path, struct stat* st) {
  if (absl::Status s = BeforeCall({FsOp::kLstat, path}); !s.ok()) return s;
  return target_->Lstat(path, st);
}

absl::Status EnvWrapper::Fstat(int fd, absl::string_view name,
                               struct stat* st) {
  if (absl::Status s = BeforeCall({FsOp::kFstat, name}); !s.ok()) return s;
  return target_->Fstat(fd, name, st);
}

absl::Status EnvWrapper::Access(const std::string& path, int mode) {
  if (absl::Status s = BeforeCall({FsOp::kAccess, path}); !s.ok()) return s;
  return target_->Access(path, mode);
}

absl::Status EnvWrapper::Rename(const std::string& from,
                                const std::string& to) {
  if (absl::Status s = BeforeCall({FsOp::kRename, from, to}); !s.ok()) {
    return s;
  }
  return target_->Rename(from, to);
}

absl::Status EnvWrapper::Link(const std::string& from, const std::string& to) {
  if (absl::Status s = BeforeCall({FsOp::kLink, from, to}); !s.ok()) return s;
  return target_->Link(from, to);
}

absl::Status EnvWrapper::Unlink(const std::string& path) {
  if (absl::Status s = BeforeCall({FsOp::kUnlink, path}); !s.ok()) return s;
  return target_->Unlink(path);
}

absl::Status EnvWrapper::Mkdir(const std::string& path, mode_t mode) {
  if (absl::Status s = BeforeCall({FsOp::kMkdir, path}); !s.ok()) return s;
  return target_->Mkdir(path, mode);
}

absl::Status EnvWrapper::Rmdir(const std::string& path) {
  if (absl::Status s = BeforeCall({FsOp::kRmdir, path}); !s.ok()) return s;
  return target_->Rmdir(path);
}

absl::StatusOr<std::vector<std::string>> EnvWrapper::ListDir(
    const std::string& dir) {
  if (absl::Status s = BeforeCall({FsOp::kListDir, dir}); !s.ok()) return s;
  return target_->ListDir(dir);
}

absl::Status EnvWrapper::Write(int fd, absl::string_view name,
                               absl::string_view data) {
  if (absl::Status s = BeforeCall({FsOp::kWrite, name}); !s.ok()) return s;
  return target_->Write(fd, name, data);
}

absl::StatusOr<size_t> EnvWrapper::CopyRange(int in_fd, int out_fd,
                                             absl::string_view name,
                                             size_t length) {
  if (absl::Status s = BeforeCall({FsOp::kWrite, name}); !s.ok()) return s;
  return target_->CopyRange(in_fd, out_fd, name, length);
}

absl::Status EnvWrapper::Sync(int fd, absl::string_view name) {
  if (absl::Status s = BeforeCall({FsOp::kSync, name}); !s.ok()) return s;
  return target_->Sync(fd, name);
}

absl::Status EnvWrapper::SyncDir(const std::string& dir) {
  if (absl::Status s = BeforeCall({FsOp::kSyncDir, dir}); !s.ok()) return s;
  return target_->SyncDir(dir);
}

absl::Status EnvWrapper::Touch(int fd, absl::string_view name) {
  if (absl::Status s = BeforeCall({FsOp::kTouch, name}); !s.ok()) return s;
  return target_->Touch(fd, name);
}

absl::Status EnvWrapper::Chmod(int fd, absl::string_view name, mode_t mode) {
  if (absl::Status s = BeforeCall({FsOp::kChmod, name}); !s.ok()) return s;
  return target_->Chmod(fd, name, mode);
}

absl::Status EnvWrapper::TryLock(int fd, absl::string_view name) {
  if (absl::Status s = BeforeCall({FsOp::kLock, name}); !s.ok()) return s;
  return target_->TryLock(fd, name);
}

absl::Status EnvWrapper::StatFs(const std::string& path, struct statvfs* out) {
  if (absl::Status s = BeforeCall({FsOp::kStatFs, path}); !s.ok()) return s;
  return target_->StatFs(path, out);
}

absl::StatusOr<int64_t> EnvWrapper::FilesystemType(const std::string& path) {
  if (absl::Status s = BeforeCall({FsOp::kStatFs, path}); !s.ok()) return s;
  return target_->FilesystemType(path);
}

}  // namespace neffd
