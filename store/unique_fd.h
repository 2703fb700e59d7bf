// store/unique_fd.h
//
// UniqueFd owns a file descriptor and closes it when it goes out of scope,
// so no early return leaks one. Move-only; thread-compatible.
#ifndef NEFFD_STORE_UNIQUE_FD_H_
#define NEFFD_STORE_UNIQUE_FD_H_

#include <unistd.h>

namespace neffd {

class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) close(fd_);
      fd_ = other.release();
    }
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() {
    if (fd_ >= 0) close(fd_);
  }

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

}  // namespace neffd

#endif  // NEFFD_STORE_UNIQUE_FD_H_
