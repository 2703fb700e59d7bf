#include "daemon/locks/lock_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "store/unique_fd.h"

namespace neffd {
namespace {

constexpr absl::string_view kSuffix = ".lock";

// /proc/locks reports st_size 0: read it to the end.
absl::StatusOr<std::string> ReadProcFile(const std::string& path, Env* env) {
  absl::StatusOr<UniqueFd> fd = env->Open(path, O_RDONLY | O_CLOEXEC);
  if (!fd.ok()) return fd.status();
  std::string out;
  char buf[1 << 14];
  for (;;) {
    const ssize_t n = read(fd->get(), buf, sizeof(buf));
    if (n < 0) return absl::ErrnoToStatus(errno, absl::StrCat("read ", path));
    if (n == 0) return out;
    out.append(buf, n);
  }
}

struct FileId {
  dev_t dev;
  ino_t ino;
  bool operator==(const FileId& o) const {
    return dev == o.dev && ino == o.ino;
  }
  template <typename H>
  friend H AbslHashValue(H h, const FileId& id) {
    return H::combine(std::move(h), id.dev, id.ino);
  }
};

// The holders of granted exclusive flocks, by file: lines such as
//   "3: FLOCK  ADVISORY  WRITE 4242 08:01:1234567 0 EOF"
// ("3: -> FLOCK ..." is a blocked request, not a hold). Device numbers are
// hex major:minor.
absl::flat_hash_map<FileId, int64_t> ParseFlocks(absl::string_view text) {
  absl::flat_hash_map<FileId, int64_t> held;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    std::vector<absl::string_view> f =
        absl::StrSplit(line, ' ', absl::SkipWhitespace());
    if (f.size() < 6 || f[1] != "FLOCK" || f[3] != "WRITE") continue;
    std::vector<absl::string_view> id = absl::StrSplit(f[5], ':');
    uint32_t major_num = 0, minor_num = 0;
    uint64_t ino = 0;
    int64_t pid = 0;
    if (id.size() != 3 || !absl::SimpleHexAtoi(id[0], &major_num) ||
        !absl::SimpleHexAtoi(id[1], &minor_num) ||
        !absl::SimpleAtoi(id[2], &ino) || !absl::SimpleAtoi(f[4], &pid)) {
      continue;
    }
    held[FileId{makedev(major_num, minor_num), static_cast<ino_t>(ino)}] = pid;
  }
  return held;
}

// The keys of {locks_dir}/*.lock, regular files only.
std::vector<std::string> LockFileKeys(const std::string& locks_dir, Env* env) {
  std::vector<std::string> keys;
  absl::StatusOr<std::vector<std::string>> names = env->ListDir(locks_dir);
  if (!names.ok()) return keys;
  for (const std::string& name : *names) {
    absl::string_view key = name;
    if (!absl::ConsumeSuffix(&key, kSuffix) || key.empty()) continue;
    keys.emplace_back(key);
  }
  std::sort(keys.begin(), keys.end());
  return keys;
}

std::string PathOf(const std::string& locks_dir, absl::string_view key) {
  return absl::StrCat(locks_dir, "/", key, kSuffix);
}

}  // namespace

absl::StatusOr<std::vector<HeldLockFile>> HeldLockFiles(
    const std::string& locks_dir, Env* env, pid_t self,
    const std::string& proc_locks) {
  absl::StatusOr<std::string> text = ReadProcFile(proc_locks, env);
  if (!text.ok()) return text.status();
  const absl::flat_hash_map<FileId, int64_t> flocks = ParseFlocks(*text);
  std::vector<HeldLockFile> held;
  for (const std::string& key : LockFileKeys(locks_dir, env)) {
    const std::string path = PathOf(locks_dir, key);
    struct stat st;
    if (!env->Lstat(path, &st).ok() || !S_ISREG(st.st_mode)) continue;
    auto it = flocks.find(FileId{st.st_dev, st.st_ino});
    if (it == flocks.end() || it->second == self) continue;
    held.push_back(HeldLockFile{key, path, it->second});
  }
  return held;
}

uint64_t RemoveUnheldLockFiles(const std::string& locks_dir, Env* env) {
  uint64_t removed = 0;
  for (const std::string& key : LockFileKeys(locks_dir, env)) {
    const std::string path = PathOf(locks_dir, key);
    // O_NONBLOCK | O_NOFOLLOW: a FIFO or symlink planted there is skipped,
    // never waited on or followed.
    absl::StatusOr<UniqueFd> fd =
        env->Open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (!fd.ok()) continue;
    struct stat mine, named;
    if (!env->Fstat(fd->get(), path, &mine).ok() || !S_ISREG(mine.st_mode) ||
        !env->TryLock(fd->get(), path).ok()) {
      continue;  // held: a compile (ours or a rank's) is running
    }
    // Unlink only the file we locked: a rank may have replaced it.
    if (env->Lstat(path, &named).ok() && named.st_ino == mine.st_ino &&
        named.st_dev == mine.st_dev && env->Unlink(path).ok()) {
      ++removed;
    }
  }  // each flock is released as its descriptor closes, after the unlink
  return removed;
}

}  // namespace neffd
