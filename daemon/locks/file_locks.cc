#include "daemon/locks/file_locks.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "store/file_util.h"
#include "store/liveness.h"

namespace neffd {
namespace {

class FileLock : public ExternalLock {
 public:
  FileLock(UniqueFd local, UniqueFd lease, std::string lease_path,
           std::atomic<uint64_t> *ops)
      : local_(std::move(local)),
        lease_(std::move(lease)),
        lease_path_(std::move(lease_path)),
        ops_(ops) {}

  ~FileLock() override {
    // Remove the lease file only if it is still ours: a host that broke it
    // may have created its own since.
    if (lease_.valid() && StillHeld()) {
      Count(1);
      unlink(lease_path_.c_str());
    }
  }

  void Refresh() override {
    if (!lease_.valid()) return;
    Count(1);
    futimens(lease_.get(), nullptr);
  }

  bool StillHeld() override {
    if (!lease_.valid()) return true;
    struct stat mine, named;
    Count(1);
    return fstat(lease_.get(), &mine) == 0 &&
           lstat(lease_path_.c_str(), &named) == 0 &&
           mine.st_ino == named.st_ino && mine.st_dev == named.st_dev;
  }

 private:
  void Count(int n) {
    if (ops_ != nullptr) *ops_ += n;
  }

  UniqueFd local_;  // flock held; released on close
  UniqueFd lease_;  // cross-host lease file, kept open for futimens
  const std::string lease_path_;
  std::atomic<uint64_t> *const ops_;
};

class FileLocks : public ExternalLocks {
 public:
  explicit FileLocks(FileLocksOptions options) : options_(std::move(options)) {}

  std::unique_ptr<ExternalLock> TryTake(const EntryKey &id,
                                        const std::string &lease_id) override {
    UniqueFd local = TakeLocal(id);
    if (!local.valid()) return nullptr;
    if (!options_.shared) {
      return std::make_unique<FileLock>(std::move(local), UniqueFd(), "",
                                        nullptr);
    }
    const std::string dir = options_.entry_dir(id);
    const std::string path = absl::StrCat(dir, "/", options_.lease_file_name);
    for (int attempt = 0; attempt < 2; ++attempt) {
      Count(1);
      UniqueFd lease(open(path.c_str(),
                          O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          0644));
      if (!lease.valid() && errno == ENOENT) {
        Count(1);
        if (!MakeDirs(dir).ok()) return nullptr;
        continue;
      }
      if (lease.valid()) {
        std::string content =
            absl::StrCat(options_.host_id, " ", getpid(), " ", lease_id, " ",
                         absl::ToUnixMillis(absl::Now()), "\n");
        (void)WriteAll(lease.get(), content, path);
        return std::make_unique<FileLock>(std::move(local), std::move(lease),
                                          path, options_.shared_ops);
      }
      if (errno != EEXIST || !BreakIfStale(path)) return nullptr;
    }
    return nullptr;
  }

 private:
  void Count(int n) {
    if (options_.shared_ops != nullptr) *options_.shared_ops += n;
  }

  UniqueFd TakeLocal(const EntryKey &id) {
    absl::StatusOr<UniqueFd> fd = OpenLockFile(options_.locks_dir, id);
    if (!fd.ok()) {
      // An unusable lock dir must not wedge every key: the daemon's own
      // table still excludes its clients. Hold a placeholder.
      return UniqueFd(open("/dev/null", O_RDONLY | O_CLOEXEC));
    }
    if (flock(fd->get(), LOCK_EX | LOCK_NB) != 0) return UniqueFd();
    return *std::move(fd);
  }

  // A lease file from this host's previous daemon whose process is gone.
  bool FromDeadIncarnation(const std::string &content) {
    std::vector<std::string> fields =
        absl::StrSplit(content, ' ', absl::SkipWhitespace());
    int64_t pid = 0;
    if (fields.size() < 2 || fields[0] != options_.host_id ||
        !absl::SimpleAtoi(fields[1], &pid) || pid <= 0 || pid == getpid()) {
      return false;
    }
    return ProcessIsGone(pid);
  }

  // True if the lease file at `path` was stale and this call removed it.
  bool BreakIfStale(const std::string &path) {
    struct stat judged;
    Count(1);
    if (lstat(path.c_str(), &judged) != 0) return errno == ENOENT;
    absl::StatusOr<std::string> content = ReadSmallFile(path, 4096);
    if (!(content.ok() && FromDeadIncarnation(*content)) &&
        !UnchangedForTooLong(path, judged)) {
      return false;
    }
    const std::string doomed =
        absl::StrCat(path, ".broken.", options_.host_id, ".", getpid());
    Count(3);
    if (rename(path.c_str(), doomed.c_str()) != 0) {
      return errno == ENOENT;  // released or broken meanwhile: try again
    }
    struct stat taken;
    if (lstat(doomed.c_str(), &taken) == 0 && taken.st_ino != judged.st_ino) {
      // A fresh lease replaced the stale one between our look and our
      // rename: put it back (link fails safely if yet another appeared).
      Count(1);
      if (link(doomed.c_str(), path.c_str()) != 0) {
        // yet another lease appeared meanwhile; it stands
      }
      unlink(doomed.c_str());
      return false;
    }
    unlink(doomed.c_str());
    return true;
  }

  // Records what `path` looks like now; true once it has looked exactly so
  // for stale_after - poll_interval. A live holder refreshes every TTL/3,
  // so an unchanged window that long means it is gone.
  bool UnchangedForTooLong(const std::string &path, const struct stat &st) {
    const absl::Duration now =
        absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
    absl::MutexLock lock(&mu_);
    Observation &seen = observed_[path];
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
    absl::Duration since;  // steady clock
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
