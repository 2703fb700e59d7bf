#include "daemon/remote_tier/s3_gate.h"

#include <utility>

#include "absl/strings/match.h"
#include "daemon/log/log.h"

namespace neffd {
namespace {

constexpr char kSkipped[] = "skipped: the S3 circuit breaker is open";

}  // namespace

S3Gate::S3Gate(remote::CircuitBreakerOptions breaker)
    : breaker_(std::move(breaker)) {}

absl::Status S3Gate::Run(const std::function<absl::Status()>& call) {
  if (!breaker_.Allow()) {
    return remote::RemoteError(remote::RemoteErrorCause::kOther, kSkipped);
  }
  absl::Status status = call();
  breaker_.Record(status);
  Note(status);
  return status;
}

void S3Gate::Note(const absl::Status& status) {
  if (status.ok() || IsNotFound(status)) {
    absl::MutexLock lock(&mu_);
    if (failing_) {
      log::Info("remote_recovered", {});
      failing_ = false;
      logged_.fill(false);
    }
    return;
  }
  const remote::RemoteErrorCause cause = remote::RemoteErrorCauseOf(status);
  {
    absl::MutexLock lock(&mu_);
    failing_ = true;
    bool& logged = logged_[static_cast<int>(cause)];
    if (logged) return;
    logged = true;
  }
  log::Error("remote_error",
             {{"cause", std::string(remote::RemoteErrorCauseName(cause))},
              {"error", std::string(status.message())},
              {"effect", "S3 lookups are misses until it answers again"}});
}

bool S3Gate::IsSkipped(const absl::Status& status) {
  return !status.ok() && absl::StrContains(status.message(), kSkipped);
}

bool S3Gate::IsNotFound(const absl::Status& status) {
  return !status.ok() && remote::RemoteErrorCauseOf(status) ==
                             remote::RemoteErrorCause::kNotFound;
}

}  // namespace neffd
