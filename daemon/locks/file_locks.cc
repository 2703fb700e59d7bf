#include "daemon/locks/file_locks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "store/file_util.h"
#include "store/liveness.h"

namespace neffd {
namespace {

// A lease record is one short line; anything larger was not written by a
// daemon.
constexpr size_t kMaxLeaseRecordBytes = 4096;

// Marks the lease id of a record written by an etcd holder.
constexpr char kEtcdMark[] = "etcd:";

class FileLock : public ExternalLock {
 public:
  FileLock(UniqueFd local, UniqueFd lease, std::string lease_path, Env* env)
      : local_(std::move(local)),
        lease_(std::move(lease)),
        lease_path_(std::move(lease_path)),
        env_(env) {}

  ~FileLock() override {
    // Remove the lease file only if it is still ours: a host that broke it
    // may have created its own since.
    if (lease_.valid() && StillHeld()) (void)env_->Unlink(lease_path_);
  }

  void Refresh() override {
    if (lease_.valid()) (void)env_->Touch(lease_.get(), lease_path_);
  }

  bool StillHeld() override {
    if (!lease_.valid()) return true;
    struct stat mine, named;
    return env_->Fstat(lease_.get(), lease_path_, &mine).ok() &&
           env_->Lstat(lease_path_, &named).ok() &&
           mine.st_ino == named.st_ino && mine.st_dev == named.st_dev;
  }

 private:
  UniqueFd local_;  // flock held; released on close
  UniqueFd lease_;  // cross-host lease file, kept open for futimens
  const std::string lease_path_;
  Env* const env_;  // the shared store's
};

class FileLocks : public ExternalLocks {
 public:
  explicit FileLocks(FileLocksOptions options) : options_(std::move(options)) {}

  std::unique_ptr<ExternalLock> TryTake(const EntryKey& id,
                                        const std::string& lease_id) override {
    UniqueFd local = TakeLocal(id);
    if (!local.valid()) return nullptr;
    if (!options_.shared) {
      return std::make_unique<FileLock>(std::move(local), UniqueFd(), "",
                                        nullptr);
    }
    Env* const shared = options_.shared_env;
    const std::string dir = options_.entry_dir(id);
    const std::string path = absl::StrCat(dir, "/", options_.lease_file_name);
    for (int attempt = 0; attempt < 2; ++attempt) {
      absl::StatusOr<UniqueFd> lease =
          shared->Open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
      if (absl::IsNotFound(lease.status())) {
        if (!MakeGroupDirs(dir, kSharedDirMode, shared).ok()) return nullptr;
        continue;
      }
      if (lease.ok()) {
        std::string content =
            absl::StrCat(options_.host_id, " ", getpid(), " ",
                         options_.etcd_fenced ? kEtcdMark : "", lease_id, " ",
                         absl::ToUnixMillis(options_.env->Now()), "\n");
        (void)shared->Write(lease->get(), path, content);
        return std::make_unique<FileLock>(std::move(local), *std::move(lease),
                                          path, shared);
      }
      if (!absl::IsAlreadyExists(lease.status()) ||
          !BreakIfStale(id, path, options_.lease_file_name)) {
        return nullptr;
      }
    }
    return nullptr;
  }

 private:
  UniqueFd TakeLocal(const EntryKey& id) {
    absl::StatusOr<UniqueFd> fd =
        OpenLockFile(options_.locks_dir, id, options_.env);
    if (!fd.ok()) {
      // An unusable lock dir must not wedge every key: the daemon's own
      // table still excludes its clients. Hold a placeholder.
      return options_.env->Open("/dev/null", O_RDONLY).value_or(UniqueFd());
    }
    if (!options_.env->TryLock(fd->get(), LockFilePath(options_.locks_dir, id))
             .ok()) {
      return UniqueFd();
    }
    return *std::move(fd);
  }

  // "host pid lease-id unix-ms", as TryTake writes it.
  static bool IsLeaseRecord(const std::string& content) {
    std::vector<std::string> fields =
        absl::StrSplit(content, ' ', absl::SkipWhitespace());
    int64_t pid = 0, ms = 0;
    return fields.size() == 4 && absl::SimpleAtoi(fields[1], &pid) && pid > 0 &&
           absl::SimpleAtoi(fields[3], &ms);
  }

  // Written by a holder of the key in etcd (FileLocksOptions::etcd_fenced).
  static bool IsEtcdRecord(const std::string& content) {
    std::vector<std::string> fields =
        absl::StrSplit(content, ' ', absl::SkipWhitespace());
    return fields.size() == 4 && absl::StartsWith(fields[2], kEtcdMark);
  }

  // A lease file from this host's previous daemon whose process is gone.
  bool FromDeadIncarnation(const std::string& content) {
    std::vector<std::string> fields =
        absl::StrSplit(content, ' ', absl::SkipWhitespace());
    int64_t pid = 0;
    if (fields.size() < 2 || fields[0] != options_.host_id ||
        !absl::SimpleAtoi(fields[1], &pid) || pid <= 0 || pid == getpid()) {
      return false;
    }
    return ProcessIsGone(pid);
  }

  // True if the lease file at `path` (named `name` in the entry directory)
  // was stale (or planted) and this call removed it.
  bool BreakIfStale(const EntryKey& id, const std::string& path,
                    const std::string& name) {
    Env* const shared = options_.shared_env;
    struct stat judged;
    if (absl::Status s = shared->Lstat(path, &judged); !s.ok()) {
      return absl::IsNotFound(s);
    }
    // Never blocks: a FIFO or socket there is damage, not a hang.
    absl::StatusOr<std::string> content =
        ReadSmallFile(path, kMaxLeaseRecordBytes, shared);
    std::string planted;
    if (IsDamage(content.status())) {
      planted = std::string(content.status().message());
    } else if (content.ok() && !IsLeaseRecord(*content)) {
      if (!UnchangedForTooLong(path, judged)) return false;
      planted = absl::StrCat(name, " is not a lease record (a foreign file)");
    } else if (!(content.ok() && FromDeadIncarnation(*content)) &&
               !(content.ok() && options_.etcd_fenced &&
                 IsEtcdRecord(*content)) &&
               !UnchangedForTooLong(path, judged)) {
      return false;
    }
    const std::string doomed =
        absl::StrCat(path, ".broken.", options_.host_id, ".", getpid());
    if (absl::Status s = shared->Rename(path, doomed); !s.ok()) {
      return absl::IsNotFound(s);  // released or broken meanwhile: try again
    }
    struct stat taken;
    if (shared->Lstat(doomed, &taken).ok() && taken.st_ino != judged.st_ino) {
      // A fresh lease replaced the stale one between our look and our
      // rename: put it back (link fails safely if yet another appeared, and
      // then that one stands).
      (void)shared->Link(doomed, path);
      (void)shared->Unlink(doomed);
      return false;
    }
    if (planted.empty() || !Quarantine(id, doomed, name, planted)) {
      (void)RemoveTree(doomed, shared);
    }
    return true;
  }

  // Moves a broken planted lease file to the quarantine directory beside a
  // reason file; false if there is none or the move failed.
  bool Quarantine(const EntryKey& id, const std::string& doomed,
                  const std::string& name, const std::string& reason) {
    return options_.quarantine_dir &&
           MoveToQuarantine(
               options_.quarantine_dir(id), doomed,
               absl::StrCat(id.compiler_version(), "__", id.key(), "__", name),
               reason, options_.host_id, options_.shared_env)
               .ok();
  }

  // Records what `path` looks like now; true once it has looked exactly so
  // for stale_after - poll_interval. A live holder refreshes every TTL/3,
  // so an unchanged window that long means it is gone.
  bool UnchangedForTooLong(const std::string& path, const struct stat& st) {
    const absl::Duration now = options_.env->MonotonicNow();
    absl::MutexLock lock(&mu_);
    Observation& seen = observed_[path];
    if (seen.inode != st.st_ino ||
        seen.mtime != absl::TimeFromTimespec(st.st_mtim)) {
      seen = Observation{st.st_ino, absl::TimeFromTimespec(st.st_mtim), now};
      return false;
    }
    if (now - seen.since < options_.stale_after - options_.poll_interval) {
      return false;
    }
    observed_.erase(path);
    return true;
  }

  struct Observation {
    ino_t inode = 0;
    absl::Time mtime;
    absl::Duration since;  // monotonic clock
  };

  const FileLocksOptions options_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Observation> observed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<ExternalLocks> NewFileLocks(FileLocksOptions options) {
  return std::make_unique<FileLocks>(std::move(options));
}

}  // namespace neffd
