// daemon/remote_tier/s3_gate.h
//
// S3Gate is the one door of the S3 tier's calls: the circuit breaker decides
// whether a call goes (a dead S3 then costs nothing per miss), the call's
// outcome is reported back to it, and a failure is logged as one error line
// per cause (`remote_error cause=access_denied error="S3 GET s3://B/K: HTTP
// 403 InvalidAccessKeyId: ..."`), not again until a call succeeds, so wrong
// credentials or a dead endpoint say so once instead of once per miss.
//
// A skipped call returns Unavailable tagged kOther with "skipped: the S3
// circuit breaker is open"; IsSkipped() tells it apart. A not-found answer is
// not a failure.
//
// Thread-safe.
#ifndef NEFFD_DAEMON_REMOTE_TIER_S3_GATE_H_
#define NEFFD_DAEMON_REMOTE_TIER_S3_GATE_H_

#include <array>
#include <functional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/s3/circuit_breaker.h"
#include "daemon/s3/remote_error.h"

namespace neffd {

class S3Gate {
 public:
  explicit S3Gate(remote::CircuitBreakerOptions breaker);

  // Runs `call` unless the breaker is open, and records its outcome.
  absl::Status Run(const std::function<absl::Status()>& call);
  template <typename T>
  absl::StatusOr<T> Run(const std::function<absl::StatusOr<T>()>& call) {
    absl::StatusOr<T> result = absl::UnavailableError("not run");
    absl::Status status = Run([&] {
      result = call();
      return result.status();
    });
    if (!status.ok()) return status;
    return result;
  }

  static bool IsSkipped(const absl::Status& status);
  // True for a status that means "S3 has no such object".
  static bool IsNotFound(const absl::Status& status);

  remote::CircuitBreakerStats breaker() const { return breaker_.stats(); }

 private:
  void Note(const absl::Status& status);

  remote::CircuitBreaker breaker_;
  absl::Mutex mu_;
  std::array<bool, remote::kRemoteErrorCauseCount> logged_
      ABSL_GUARDED_BY(mu_){};
  bool failing_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_REMOTE_TIER_S3_GATE_H_
