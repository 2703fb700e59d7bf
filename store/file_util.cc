#include "store/file_util.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace neffd {

UniqueFd &UniqueFd::operator=(UniqueFd &&other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.release();
  }
  return *this;
}

UniqueFd::~UniqueFd() {
  if (fd_ >= 0) close(fd_);
}

absl::Status WriteAll(int fd, absl::string_view data, absl::string_view what) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("writing ", what));
    }
    data.remove_prefix(n);
  }
  return absl::OkStatus();
}

absl::Status MakeDirs(const std::string &path, int mode) {
  if (path.empty()) return absl::InvalidArgumentError("empty directory path");
  for (size_t pos = 1; pos <= path.size(); ++pos) {
    if (pos != path.size() && path[pos] != '/') continue;
    std::string prefix = path.substr(0, pos);
    if (mkdir(prefix.c_str(), mode) != 0 && errno != EEXIST) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("creating directory ", prefix));
    }
  }
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("stat ", path));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a directory"));
  }
  return absl::OkStatus();
}

std::string UniqueTempName(absl::string_view base, absl::string_view host) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  return absl::StrFormat(".%s.tmp.%s.%d.%016x", base, host, getpid(), rng());
}

absl::Status FsyncDir(const std::string &dir) {
  UniqueFd fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid())
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", dir));
  if (fsync(fd.get()) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("fsync ", dir));
  }
  return absl::OkStatus();
}

absl::Status WriteFileAtomically(const std::string &dir, absl::string_view name,
                                 absl::string_view data, absl::string_view host,
                                 bool durable) {
  std::string tmp = absl::StrCat(dir, "/", UniqueTempName(name, host));
  UniqueFd fd(open(tmp.c_str(),
                   O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!fd.valid())
    return absl::ErrnoToStatus(errno, absl::StrCat("creating ", tmp));
  absl::Status status = WriteAll(fd.get(), data, tmp);
  if (status.ok() && durable && fsync(fd.get()) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("fsync ", tmp));
  }
  std::string target = absl::StrCat(dir, "/", name);
  if (status.ok() && rename(tmp.c_str(), target.c_str()) != 0) {
    status = absl::ErrnoToStatus(errno, absl::StrCat("renaming to ", target));
  }
  if (!status.ok()) {
    unlink(tmp.c_str());
    return status;
  }
  return durable ? FsyncDir(dir) : absl::OkStatus();
}

absl::StatusOr<std::string> ReadSmallFile(const std::string &path,
                                          size_t max_bytes) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid())
    return absl::ErrnoToStatus(errno, absl::StrCat("opening ", path));
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("reading ", path));
    }
    if (n == 0) break;
    out.append(buf, n);
    if (out.size() > max_bytes) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is larger than ", max_bytes, " bytes"));
    }
  }
  return out;
}

}  // namespace neffd
