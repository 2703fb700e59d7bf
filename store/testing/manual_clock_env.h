// store/testing/manual_clock_env.h
//
// ManualClockEnv is an Env whose clock stands still until the test moves it:
// Now() is what Set() made it, Advance() moves the wall clock and the
// monotonic clock together, and SleepFor() advances them instead of
// sleeping. Filesystem calls go to the wrapped Env (Env::Default() unless
// given), so file mtimes still come from the real clock.
//
// Thread-safe.
#ifndef NEFFD_STORE_TESTING_MANUAL_CLOCK_ENV_H_
#define NEFFD_STORE_TESTING_MANUAL_CLOCK_ENV_H_

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/env.h"

namespace neffd {

class ManualClockEnv : public EnvWrapper {
 public:
  explicit ManualClockEnv(absl::Time start, Env* target = Env::Default())
      : EnvWrapper(target), now_(start) {}

  absl::Time Now() override {
    absl::MutexLock lock(&mu_);
    return now_;
  }
  absl::Duration MonotonicNow() override {
    absl::MutexLock lock(&mu_);
    return elapsed_;
  }
  void SleepFor(absl::Duration duration) override { Advance(duration); }

  // Sets the wall clock (either way); the monotonic clock does not move.
  void Set(absl::Time now) {
    absl::MutexLock lock(&mu_);
    now_ = now;
  }
  // Moves both clocks forward by `duration` (ignored if negative).
  void Advance(absl::Duration duration) {
    if (duration <= absl::ZeroDuration()) return;
    absl::MutexLock lock(&mu_);
    now_ += duration;
    elapsed_ += duration;
  }

 private:
  absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  absl::Duration elapsed_ ABSL_GUARDED_BY(mu_);
};

}  // namespace neffd

#endif  // NEFFD_STORE_TESTING_MANUAL_CLOCK_ENV_H_
