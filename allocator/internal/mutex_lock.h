// allocator/internal/mutex_lock.h
//
// MutexLock is absl::MutexLock that ThreadSanitizer also understands when
// absl itself was not built with -fsanitize=thread (Debian's libabsl is not,
// so TSAN cannot see absl::Mutex's internal synchronization and reports every
// guarded access as a race). Under TSAN it adds an acquire after Lock and a
// release before Unlock on the mutex's address; otherwise it is exactly
// absl::MutexLock.

#ifndef NEFFD_ALLOCATOR_INTERNAL_MUTEX_LOCK_H_
#define NEFFD_ALLOCATOR_INTERNAL_MUTEX_LOCK_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

#if defined(NEFFD_TSAN)
#include <sanitizer/tsan_interface.h>
#endif

namespace neffd::allocator::internal {

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(absl::Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu)
      : mu_(mu) {
    mu_->Lock();
#if defined(NEFFD_TSAN)
    __tsan_acquire(mu_);
#endif
  }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() {
#if defined(NEFFD_TSAN)
    __tsan_release(mu_);
#endif
    mu_->Unlock();
  }

  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  absl::Mutex* const mu_;
};

}  // namespace neffd::allocator::internal

#endif  // NEFFD_ALLOCATOR_INTERNAL_MUTEX_LOCK_H_
