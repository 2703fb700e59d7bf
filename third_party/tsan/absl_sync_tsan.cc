// third_party/tsan/absl_sync_tsan.cc: linked only under --config=tsan.
//
// Debian's libabsl is not built with -fsanitize=thread, so ThreadSanitizer
// cannot see that absl::Mutex and absl::CondVar order memory accesses and
// reports every access guarded by an absl::Mutex (ours, and gRPC's) as a
// race. This file interposes the blocking entry points of libabsl's Mutex and
// CondVar: each wrapper calls the real function (found with dlsym(RTLD_NEXT))
// and tells TSAN about the happens-before edge it creates: a release on the
// mutex's address before it is given up, an acquire after it is taken. Calls
// from inside libabsl itself (absl::Notification, BlockingCounter) and from
// libgrpc resolve to these wrappers too, through the dynamic linker.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"

namespace {

// Mangled names in libabsl_synchronization.so (inline namespace "debian3").
#define NEFFD_ABSL "_ZN4absl7debian3"

template <typename Fn>
Fn Real(const char* mangled) {
  void* fn = dlsym(RTLD_NEXT, mangled);
  if (fn == nullptr) {
    std::fprintf(stderr, "absl_sync_tsan: %s not found in libabsl\n", mangled);
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static auto real = Real<void (*)(Mutex*)>(NEFFD_ABSL "5Mutex4LockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::ReaderLock() {
  static auto real = Real<void (*)(Mutex*)>(NEFFD_ABSL "5Mutex10ReaderLockEv");
  real(this);
  __tsan_acquire(this);
}

void Mutex::Unlock() {
  static auto real = Real<void (*)(Mutex*)>(NEFFD_ABSL "5Mutex6UnlockEv");
  __tsan_release(this);
  real(this);
}

void Mutex::ReaderUnlock() {
  static auto real =
      Real<void (*)(Mutex*)>(NEFFD_ABSL "5Mutex12ReaderUnlockEv");
  __tsan_release(this);
  real(this);
}

bool Mutex::TryLock() {
  static auto real = Real<bool (*)(Mutex*)>(NEFFD_ABSL "5Mutex7TryLockEv");
  bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static auto real =
      Real<bool (*)(Mutex*)>(NEFFD_ABSL "5Mutex13ReaderTryLockEv");
  bool locked = real(this);
  if (locked) __tsan_acquire(this);
  return locked;
}

void Mutex::LockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      NEFFD_ABSL "5Mutex8LockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

void Mutex::ReaderLockWhen(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      NEFFD_ABSL "5Mutex14ReaderLockWhenERKNS0_9ConditionE");
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      NEFFD_ABSL "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  bool r = real(this, cond, timeout);
  __tsan_acquire(this);  // held either way
  return r;
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      NEFFD_ABSL "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  bool r = real(this, cond, deadline);
  __tsan_acquire(this);
  return r;
}

void Mutex::Await(const Condition& cond) {
  static auto real = Real<void (*)(Mutex*, const Condition&)>(
      NEFFD_ABSL "5Mutex5AwaitERKNS0_9ConditionE");
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      NEFFD_ABSL "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  __tsan_release(this);
  bool r = real(this, cond, timeout);
  __tsan_acquire(this);
  return r;
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      NEFFD_ABSL "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  __tsan_release(this);
  bool r = real(this, cond, deadline);
  __tsan_acquire(this);
  return r;
}

void CondVar::Wait(Mutex* mu) {
  static auto real =
      Real<void (*)(CondVar*, Mutex*)>(NEFFD_ABSL "7CondVar4WaitEPNS0_5MutexE");
  __tsan_release(mu);
  real(this, mu);
  __tsan_acquire(mu);
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      NEFFD_ABSL "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  __tsan_release(mu);
  bool r = real(this, mu, timeout);
  __tsan_acquire(mu);
  return r;
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static auto real = Real<bool (*)(CondVar*, Mutex*, Time)>(
      NEFFD_ABSL "7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  __tsan_release(mu);
  bool r = real(this, mu, deadline);
  __tsan_acquire(mu);
  return r;
}

ABSL_NAMESPACE_END
}  // namespace absl
