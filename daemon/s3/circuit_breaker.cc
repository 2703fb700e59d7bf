#include "daemon/s3/circuit_breaker.h"

#include <algorithm>
#include <utility>

#include "daemon/s3/remote_error.h"

namespace neffd::remote {

absl::string_view BreakerStateName(BreakerState state) {
  switch (state) {
    case BreakerState::kClosed:
      return "closed";
    case BreakerState::kOpen:
      return "open";
    case BreakerState::kHalfOpen:
      break;
  }
  return "half_open";
}

CircuitBreaker::CircuitBreaker(CircuitBreakerOptions options)
    : options_(std::move(options)) {
  stats_.backoff = options_.initial_backoff;
}

bool CircuitBreaker::Allow() {
  absl::MutexLock lock(&mu_);
  if (stats_.state == BreakerState::kOpen &&
      options_.env->Now() >= stats_.open_until) {
    stats_.state = BreakerState::kHalfOpen;
  }
  switch (stats_.state) {
    case BreakerState::kClosed:
      return true;
    case BreakerState::kHalfOpen:
      if (!probe_in_flight_) {
        probe_in_flight_ = true;
        return true;
      }
      break;
    case BreakerState::kOpen:
      break;
  }
  ++stats_.calls_skipped;
  return false;
}

void CircuitBreaker::Record(const absl::Status& outcome) {
  absl::MutexLock lock(&mu_);
  const bool was_probe = probe_in_flight_;
  probe_in_flight_ = false;
  if (outcome.ok() ||
      RemoteErrorCauseOf(outcome) == RemoteErrorCause::kNotFound) {
    stats_.state = BreakerState::kClosed;
    stats_.consecutive_failures = 0;
    stats_.backoff = options_.initial_backoff;
    return;
  }
  ++stats_.consecutive_failures;
  if (was_probe) {
    stats_.backoff = std::min(stats_.backoff * 2, options_.max_backoff);
    Open();
  } else if (stats_.state == BreakerState::kClosed &&
             stats_.consecutive_failures >= options_.failure_threshold) {
    Open();
  }
}

void CircuitBreaker::Open() {
  stats_.state = BreakerState::kOpen;
  stats_.open_until = options_.env->Now() + stats_.backoff;
  ++stats_.times_opened;
}

CircuitBreakerStats CircuitBreaker::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace neffd::remote
