#include "store/wake_notice.h"

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"

namespace neffd {
namespace {

// The first page: the futex word, then the answer's size. The answer's
// bytes start at kAnswerOffset.
struct Header {
  uint32_t state;
  uint32_t answer_size;
};
constexpr uint32_t kWaiting = 0;
constexpr uint32_t kAnswered = 1;
constexpr off_t kAnswerOffset = 4096;
constexpr size_t kHeaderBytes = 4096;
// An answer is one LockResponse; anything larger is not a notice's.
constexpr uint32_t kMaxAnswer = 1 << 20;

// Shared (not _PRIVATE) futex calls: the waiters are other processes, with
// their own mappings of the same page.
long Futex(const uint32_t* word, int op, uint32_t value,
           const struct timespec* timeout) {
  return syscall(SYS_futex, word, op, value, timeout, nullptr, 0);
}

}  // namespace

WakeNotice::WakeNotice(Env* env, std::string path, UniqueFd fd, void* page)
    : env_(env), path_(std::move(path)), fd_(std::move(fd)), page_(page) {}

absl::StatusOr<std::unique_ptr<WakeNotice>> WakeNotice::Create(
    Env* env, const std::string& path, mode_t mode) {
  absl::StatusOr<UniqueFd> fd =
      env->Open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW, mode);
  if (!fd.ok()) return fd.status();
  auto fail = [&](absl::string_view what) {
    absl::Status s = absl::ErrnoToStatus(errno, absl::StrCat(what, " ", path));
    (void)env->Unlink(path);
    return s;
  };
  // Locked before anyone can know the path: a waiter that finds it unlocked
  // knows the writer is gone.
  if (absl::Status s = env->TryLock(fd->get(), path); !s.ok()) {
    (void)env->Unlink(path);
    return s;
  }
  if (ftruncate(fd->get(), kHeaderBytes) != 0) return fail("sizing");
  if (lseek(fd->get(), kAnswerOffset, SEEK_SET) != kAnswerOffset) {
    return fail("seeking in");
  }
  void* page = mmap(nullptr, kHeaderBytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                    fd->get(), 0);
  if (page == MAP_FAILED) return fail("mapping");
  return std::unique_ptr<WakeNotice>(
      new WakeNotice(env, path, *std::move(fd), page));
}

WakeNotice::~WakeNotice() {
  // Gone first, so that nobody starts waiting on a notice that is over.
  (void)env_->Unlink(path_);
  Answer({});
}

bool WakeNotice::Answer(absl::string_view answer) {
  if (answered_.exchange(true)) return false;
  auto* header = static_cast<Header*>(page_);
  const bool written =
      answer.size() <= kMaxAnswer && env_->Write(fd_.get(), path_, answer).ok();
  header->answer_size = written ? static_cast<uint32_t>(answer.size()) : 0;
  // The answer's bytes and size before the state: a waiter that sees
  // kAnswered reads them complete.
  __atomic_store_n(&header->state, kAnswered, __ATOMIC_RELEASE);
  Futex(&header->state, FUTEX_WAKE, INT_MAX, nullptr);
  // Only the first Answer gets here: nothing else uses them.
  munmap(page_, kHeaderBytes);
  page_ = nullptr;
  fd_ = UniqueFd();
  return true;
}

absl::StatusOr<WakeWait> WaitForNotice(Env* env, const std::string& path,
                                       absl::Duration deadline,
                                       absl::Duration probe_every) {
  absl::StatusOr<UniqueFd> fd = env->Open(path, O_RDONLY | O_NOFOLLOW, 0);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (absl::Status s = env->Fstat(fd->get(), path, &st); !s.ok()) return s;
  if (!S_ISREG(st.st_mode) || st.st_size < static_cast<off_t>(kHeaderBytes)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, ": not a wake notice"));
  }
  void* page = mmap(nullptr, kHeaderBytes, PROT_READ, MAP_SHARED, fd->get(), 0);
  if (page == MAP_FAILED) {
    return absl::ErrnoToStatus(errno, absl::StrCat("mapping ", path));
  }
  const auto* header = static_cast<const Header*>(page);
  WakeWait wait;
  for (;;) {
    if (__atomic_load_n(&header->state, __ATOMIC_ACQUIRE) == kAnswered) {
      const uint32_t size = std::min(header->answer_size, kMaxAnswer);
      wait.answer.resize(size);
      const ssize_t got =
          pread(fd->get(), wait.answer.data(), size, kAnswerOffset);
      if (got != static_cast<ssize_t>(size)) wait.answer.clear();
      wait.end = WakeWait::End::kAnswered;
      break;
    }
    const absl::Duration left = deadline - env->MonotonicNow();
    if (left <= absl::ZeroDuration()) {
      wait.end = WakeWait::End::kTimedOut;
      break;
    }
    const struct timespec timeout =
        absl::ToTimespec(std::min(left, probe_every));
    if (Futex(&header->state, FUTEX_WAIT, kWaiting, &timeout) == 0 ||
        errno != ETIMEDOUT) {
      continue;  // woken, changed already, or a signal: look again
    }
    // The writer holds its lock until it is done: free means it is gone.
    if (flock(fd->get(), LOCK_SH | LOCK_NB) == 0 &&
        __atomic_load_n(&header->state, __ATOMIC_ACQUIRE) != kAnswered) {
      wait.end = WakeWait::End::kAbandoned;
      break;
    }
  }
  munmap(page, kHeaderBytes);
  return wait;
}

}  // namespace neffd
