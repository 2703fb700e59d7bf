// store/env.h
//
// Env is the one door through which the store library, the daemon and the
// client reach the filesystem, the clock and new threads, in the manner of
// LevelDB's include/leveldb/env.h. Env::Default() is POSIX, absl's clock
// and std::thread. Everything else wraps an Env (EnvWrapper): CountingEnv
// counts the calls (the store's metadata-op figures come from it,
// store/counting_env.h), and tests slow, fail or stall chosen calls or move the
// clock by hand (store/testing/).
//
// The contract every implementation keeps:
//  - Each call names the file it is about: a path, or for a call on an open
//    descriptor the name it was opened under. Wrappers match faults on it;
//    errors quote it.
//  - A failed call returns absl::ErrnoToStatus(errno, "{call} {path}")
//    (FsCallError): the message names the step and the file, ENOENT is
//    NotFound, EEXIST AlreadyExists, ENOSPC and EDQUOT ResourceExhausted.
//  - EINTR is retried; nothing else is.
//  - Data is read from plain descriptors (store/digest.h copies and hashes
//    in bulk); it is written through Write, or copied between descriptors
//    inside the kernel through CopyRange (a write as wrappers see it:
//    FsOp::kWrite), so a test can fail a write.
//  - Every thread production code starts is an Env's (StartThread), so a
//    test sees and counts them, and `top -H` names them.
//  - All methods are thread-safe.
#ifndef NEFFD_STORE_ENV_H_
#define NEFFD_STORE_ENV_H_

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "store/unique_fd.h"

namespace neffd {

// The filesystem calls an Env makes, one per method.
enum class FsOp {
  kOpen,
  kStat,
  kLstat,
  kFstat,
  kAccess,
  kRename,
  kLink,
  kUnlink,
  kMkdir,
  kRmdir,
  kListDir,
  kWrite,
  kSync,
  kSyncDir,
  kTouch,
  kChmod,
  kLock,
  kStatFs,
};
inline constexpr int kNumFsOps = static_cast<int>(FsOp::kStatFs) + 1;

// The call's name in messages: "open", "rename", "fsync", ...
absl::string_view FsOpName(FsOp op);

// One call as wrappers see it before it is made.
struct FsCall {
  FsCall(FsOp op, absl::string_view path, absl::string_view target = {})
      : op(op), path(path), target(target) {}

  FsOp op;
  absl::string_view path;    // or the name an fd was opened under
  absl::string_view target;  // the new name (rename, link); else empty
};

// The status a call that failed with `err` returns:
// "{op} {path}[ to {target}]: {strerror}", coded by absl::ErrnoToStatus.
absl::Status FsCallError(const FsCall& call, int err);

// A thread an Env started. Joined by Join() or, if still joinable, by the
// destructor (never std::terminate); Detach() lets it run to its end alone.
// Move-only.
class EnvThread {
 public:
  EnvThread() = default;
  explicit EnvThread(std::thread thread) : thread_(std::move(thread)) {}
  EnvThread(EnvThread&&) = default;
  EnvThread& operator=(EnvThread&& other) {
    Join();
    thread_ = std::move(other.thread_);
    return *this;
  }
  ~EnvThread() { Join(); }

  bool joinable() const { return thread_.joinable(); }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  void Detach() {
    if (thread_.joinable()) thread_.detach();
  }

 private:
  std::thread thread_;
};

class Env {
 public:
  Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;
  virtual ~Env() = default;

  // POSIX and absl's clock; lives for the whole process.
  static Env* Default();

  // --- Files and directories ---

  // open(2) with `flags` (O_CLOEXEC is added) and `mode` for a created file.
  virtual absl::StatusOr<UniqueFd> Open(const std::string& path, int flags,
                                        mode_t mode = 0) = 0;
  virtual absl::Status Stat(const std::string& path, struct stat* st) = 0;
  // Does not follow a final symlink.
  virtual absl::Status Lstat(const std::string& path, struct stat* st) = 0;
  virtual absl::Status Fstat(int fd, absl::string_view name,
                             struct stat* st) = 0;
  // access(2): OK if this process may use `path` as `mode` (R_OK, W_OK...).
  virtual absl::Status Access(const std::string& path, int mode) = 0;
  // Atomically replaces `to` (rename(2)).
  virtual absl::Status Rename(const std::string& from,
                              const std::string& to) = 0;
  // A second name `to` for `from`; AlreadyExists if `to` exists.
  virtual absl::Status Link(const std::string& from, const std::string& to) = 0;
  virtual absl::Status Unlink(const std::string& path) = 0;
  // One directory; AlreadyExists if `path` exists (MakeDirs makes a chain).
  virtual absl::Status Mkdir(const std::string& path, mode_t mode) = 0;
  virtual absl::Status Rmdir(const std::string& path) = 0;
  // The names in `dir` (not "." or ".."), in no particular order.
  virtual absl::StatusOr<std::vector<std::string>> ListDir(
      const std::string& dir) = 0;
  // Writes all of `data` at the descriptor's offset.
  virtual absl::Status Write(int fd, absl::string_view name,
                             absl::string_view data) = 0;
  // fsync(2): the file's data and metadata reach the disk.
  // Copies up to `length` bytes from `in_fd`'s offset to `out_fd`'s (`name`)
  // inside the kernel (copy_file_range: a page-cache copy, or shared blocks
  // where the filesystem can reflink) and advances both offsets; returns
  // the bytes copied, 0 at the source's end. Unimplemented when the kernel
  // cannot copy between these two files (another filesystem type, an old
  // kernel): the caller then copies through a buffer and Write.
  virtual absl::StatusOr<size_t> CopyRange(int in_fd, int out_fd,
                                           absl::string_view name,
                                           size_t length) = 0;
  virtual absl::Status Sync(int fd, absl::string_view name) = 0;
  // Makes the names in `dir` durable (open it, fsync it).
  virtual absl::Status SyncDir(const std::string& dir) = 0;
  // Sets the file's access and modification times to now (futimens(2)).
  virtual absl::Status Touch(int fd, absl::string_view name) = 0;
  virtual absl::Status Chmod(int fd, absl::string_view name, mode_t mode) = 0;
  // An exclusive flock(2) without waiting: Unavailable while another open
  // file description holds it. Released when the descriptor is closed.
  virtual absl::Status TryLock(int fd, absl::string_view name) = 0;
  virtual absl::Status StatFs(const std::string& path, struct statvfs* out) = 0;
  // statfs(2)'s f_type for `path`'s filesystem (NFS_SUPER_MAGIC, ...): what
  // kind of filesystem it is, which statvfs does not say.
  virtual absl::StatusOr<int64_t> FilesystemType(const std::string& path) = 0;

  // --- Clock ---

  // Wall-clock time.
  virtual absl::Time Now() = 0;
  // Time since a fixed point in this process's past; never goes back. For
  // measuring intervals that wall-clock steps must not distort.
  virtual absl::Duration MonotonicNow() = 0;
  virtual void SleepFor(absl::Duration duration) = 0;

  // --- Threads ---

  // Runs `body` on a new thread named `name` (what `top -H`, gdb and
  // /proc/PID/task/*/comm show; cut to 15 bytes).
  virtual EnvThread StartThread(absl::string_view name,
                                std::function<void()> body) = 0;
};

// Forwards every call to another Env, after BeforeCall has seen it: the base
// of Envs that count, slow, fail or stall calls. Subclasses override
// BeforeCall, or single methods (the clock) to replace them.
class EnvWrapper : public Env {
 public:
  // `target` must outlive the wrapper.
  explicit EnvWrapper(Env* target) : target_(target) {}
  Env* target() const { return target_; }

  absl::StatusOr<UniqueFd> Open(const std::string& path, int flags,
                                mode_t mode = 0) override;
  absl::Status Stat(const std::string& path, struct stat* st) override;
  absl::Status Lstat(const std::string& path, struct stat* st) override;
  absl::Status Fstat(int fd, absl::string_view name, struct stat* st) override;
  absl::Status Access(const std::string& path, int mode) override;
  absl::Status Rename(const std::string& from, const std::string& to) override;
  absl::Status Link(const std::string& from, const std::string& to) override;
  absl::Status Unlink(const std::string& path) override;
  absl::Status Mkdir(const std::string& path, mode_t mode) override;
  absl::Status Rmdir(const std::string& path) override;
  absl::StatusOr<std::vector<std::string>> ListDir(
      const std::string& dir) override;
  absl::Status Write(int fd, absl::string_view name,
                     absl::string_view data) override;
  absl::StatusOr<size_t> CopyRange(int in_fd, int out_fd,
                                   absl::string_view name,
                                   size_t length) override;
  absl::Status Sync(int fd, absl::string_view name) override;
  absl::Status SyncDir(const std::string& dir) override;
  absl::Status Touch(int fd, absl::string_view name) override;
  absl::Status Chmod(int fd, absl::string_view name, mode_t mode) override;
  absl::Status TryLock(int fd, absl::string_view name) override;
  absl::Status StatFs(const std::string& path, struct statvfs* out) override;
  absl::StatusOr<int64_t> FilesystemType(const std::string& path) override;

  absl::Time Now() override { return target_->Now(); }
  absl::Duration MonotonicNow() override { return target_->MonotonicNow(); }
  void SleepFor(absl::Duration duration) override {
    target_->SleepFor(duration);
  }
  EnvThread StartThread(absl::string_view name,
                        std::function<void()> body) override {
    return target_->StartThread(name, std::move(body));
  }

 protected:
  // Runs before each filesystem call is forwarded; a non-OK status is
  // returned in its place and the call is not made. The view in `call` is
  // valid only during the call.
  virtual absl::Status BeforeCall(const FsCall& call) {
    return absl::OkStatus();
  }

 private:
  Env* const target_;
};

}  // namespace neffd

#endif  // NEFFD_STORE_ENV_H_
