// store/file_util.h
//
// Small POSIX helpers shared by the store, the lock table and the client's
// fallback mode: an owned file descriptor and the atomic-write protocol (temp
// name with O_EXCL, fsync, rename, fsync of the directory). Failed calls
// report absl::ErrnoToStatus(errno, "{what} {path}"), so ENOSPC/EDQUOT come
// back RESOURCE_EXHAUSTED and callers can tell "disk full" from a bug.
//
// All functions are thread-safe.
#ifndef NEFFD_STORE_FILE_UTIL_H_
#define NEFFD_STORE_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neffd {

// Owns a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd &&other) noexcept : fd_(other.release()) {}
  UniqueFd &operator=(UniqueFd &&other) noexcept;
  UniqueFd(const UniqueFd &) = delete;
  UniqueFd &operator=(const UniqueFd &) = delete;
  ~UniqueFd();

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }

 private:
  int fd_ = -1;
};

absl::Status WriteAll(int fd, absl::string_view data, absl::string_view what);

// mkdir -p with `mode` for the directories it creates.
absl::Status MakeDirs(const std::string &path, int mode = 0755);

// A name no other process or host will pick: ".{base}.tmp.{host}.{pid}.{rand}".
std::string UniqueTempName(absl::string_view base, absl::string_view host);

// Creates `dir/name` atomically with `data`: temp file (O_EXCL) in `dir`,
// fsync, rename over `name`, fsync `dir`. Readers see the old file or the new
// one, never a partial one. With `durable` false the two fsyncs are skipped:
// still atomic for readers and across a crash of the process, but after a
// power loss the file may be missing or empty — only for files whose loss
// or damage readers detect and survive (a marker they validate).
absl::Status WriteFileAtomically(const std::string &dir, absl::string_view name,
                                 absl::string_view data, absl::string_view host,
                                 bool durable = true);

absl::Status FsyncDir(const std::string &dir);

// The whole content of a regular file (not following a final symlink).
absl::StatusOr<std::string> ReadSmallFile(const std::string &path,
                                          size_t max_bytes);

}  // namespace neffd

#endif  // NEFFD_STORE_FILE_UTIL_H_
