#include "client/staged_output.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "store/digest.h"

namespace neffd {
namespace {

// The daemon's group reads the staged file; a copy is made with this mode.
constexpr mode_t kStagedMode = 0640;

bool SameInode(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// Copies what `in_fd` holds, from its start, to a new file at `to`.
absl::Status CopyTo(int in_fd, const std::string& to, mode_t mode,
                    uint64_t size, const std::string& from) {
  UniqueFd out(open(
      to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!out.valid()) return absl::ErrnoToStatus(errno, "creating " + to);
  if (lseek(in_fd, 0, SEEK_SET) != 0) {
    unlink(to.c_str());
    return absl::ErrnoToStatus(errno, "rewinding " + from);
  }
  absl::StatusOr<uint64_t> copied = CopyFileContents(in_fd, out.get(), from);
  if (copied.ok() && *copied == size) return absl::OkStatus();
  unlink(to.c_str());
  return copied.ok() ? absl::DataLossError(
                           absl::StrCat(from, " changed after it was compiled"))
                     : copied.status();
}

}  // namespace

absl::StatusOr<StagedOutput> StagedOutput::Stage(const std::string& path,
                                                 uint64_t size,
                                                 const std::string& staged_path,
                                                 bool may_move) {
  UniqueFd output(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  if (!output.valid() || fstat(output.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, "opening " + path);
  }
  if (!S_ISREG(st.st_mode) || static_cast<uint64_t>(st.st_size) != size) {
    return absl::DataLossError(
        absl::StrCat(path, " changed after it was compiled"));
  }
  // Renamed only as the file it was opened as (the rename goes by name),
  // and only with one name: the daemon refuses a hard link.
  struct stat by_name;
  if (may_move && st.st_nlink == 1 &&
      (st.st_mode & kStagedMode) == kStagedMode &&
      rename(path.c_str(), staged_path.c_str()) == 0) {
    if (lstat(staged_path.c_str(), &by_name) == 0 && SameInode(st, by_name)) {
      return StagedOutput(path, staged_path, std::move(output), true);
    }
    // Another file took the output's name in between: give it back.
    (void)rename(staged_path.c_str(), path.c_str());
  }
  if (absl::Status s =
          CopyTo(output.get(), staged_path, kStagedMode, size, path);
      !s.ok()) {
    return s;
  }
  return StagedOutput(path, staged_path, std::move(output), false);
}

void StagedOutput::Finish(bool published) {
  if (moved_ && !published) {
    PutBack();
  } else {
    unlink(staged_path_.c_str());  // the daemon's to remove, if it ran
  }
  output_ = UniqueFd();
}

void StagedOutput::PutBack() {
  struct stat held, staged;
  if (fstat(output_.get(), &held) != 0) return;
  if (lstat(staged_path_.c_str(), &staged) == 0 && SameInode(held, staged) &&
      rename(staged_path_.c_str(), path_.c_str()) == 0) {
    return;
  }
  // The daemon removed it (it refused the bytes, or failed): the held
  // descriptor still reads them.
  unlink(staged_path_.c_str());
  (void)CopyTo(output_.get(), path_, held.st_mode & 07777, held.st_size, path_);
}

}  // namespace neffd
