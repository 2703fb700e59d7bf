// tests/harness/wait.h
//
// "Wait until X": polls `done` until it holds or `timeout` passes, so a test
// waits for something observable instead of sleeping a guessed time.
//
// Thread-safe (no state).
#ifndef NEFFD_TESTS_HARNESS_WAIT_H_
#define NEFFD_TESTS_HARNESS_WAIT_H_

#include <functional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace neffd::test_support {

// True as soon as `done()` is; false if it still is not after `timeout`.
inline bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout,
                      absl::Duration every = absl::Milliseconds(50)) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (done()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(every);
  }
}

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_HARNESS_WAIT_H_
