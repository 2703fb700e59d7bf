// daemon/s3/circuit_breaker.h
//
// CircuitBreaker stops a caller from hammering a remote that is down, so a
// dead S3 costs nothing per lookup instead of a deadline each.
//
//   closed    -> every call goes; `failure_threshold` consecutive failures
//                open the breaker.
//   open      -> calls are skipped until the backoff has passed; the backoff
//                starts at `initial_backoff` and doubles (capped at
//                `max_backoff`) each time a probe fails.
//   half-open -> after the backoff exactly one call (the probe) goes; its
//                success closes the breaker (and resets the backoff), its
//                failure opens it again for the next, longer backoff.
//
// A failure is a status whose RemoteErrorCause is anything but kNotFound: a
// 404 is an answer from a healthy remote. Callers ask Allow() before a call
// and report each allowed call's outcome with Record(); a call that was
// allowed must be recorded, or a half-open breaker waits for its probe
// forever.
//
// The clock is injected. Thread-safe.
#ifndef NEFFD_DAEMON_S3_CIRCUIT_BREAKER_H_
#define NEFFD_DAEMON_S3_CIRCUIT_BREAKER_H_

#include <cstdint>
#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/env.h"

namespace neffd::remote {

struct CircuitBreakerOptions {
  int failure_threshold = 5;
  absl::Duration initial_backoff = absl::Seconds(5);
  absl::Duration max_backoff = absl::Minutes(5);
  Env* env = Env::Default();  // the clock
};

enum class BreakerState { kClosed, kOpen, kHalfOpen };

// "closed", "open", "half_open".
absl::string_view BreakerStateName(BreakerState state);

struct CircuitBreakerStats {
  BreakerState state = BreakerState::kClosed;
  int consecutive_failures = 0;
  uint64_t times_opened = 0;
  uint64_t calls_skipped = 0;
  // While open: when the next probe may go.
  absl::Time open_until = absl::InfinitePast();
  // The backoff the breaker opens (or opened) with.
  absl::Duration backoff = absl::ZeroDuration();
};

class CircuitBreaker {
 public:
  explicit CircuitBreaker(CircuitBreakerOptions options);

  // True if the call may go (closed, or this is the half-open probe); false
  // counts a skipped call.
  bool Allow();
  // The outcome of an allowed call.
  void Record(const absl::Status& outcome);

  CircuitBreakerStats stats() const;

 private:
  void Open() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CircuitBreakerOptions options_;
  mutable absl::Mutex mu_;
  CircuitBreakerStats stats_ ABSL_GUARDED_BY(mu_);
  bool probe_in_flight_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace neffd::remote

#endif  // NEFFD_DAEMON_S3_CIRCUIT_BREAKER_H_
