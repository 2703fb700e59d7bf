// daemon/s3/remote_error.h
//
// Why a remote (S3 or metadata-service) call failed, as a small closed set
// the daemon can count by and the circuit breaker can judge by. Every failed
// call of this package returns an absl::Status that carries its cause as a
// payload; RemoteErrorCauseOf() reads it back. A status without the payload
// (one made elsewhere) reads as kOther.
//
// The canonical codes follow the cause, so callers that only look at the code
// still see something sensible: kNotFound -> NotFound, kAccessDenied ->
// PermissionDenied, kThrottled -> ResourceExhausted, kTimeout ->
// DeadlineExceeded, kConnectionRefused and kServerError -> Unavailable,
// kOther -> Unknown (or the code the caller chose).
//
// Thread-safe (pure functions).
#ifndef NEFFD_DAEMON_S3_REMOTE_ERROR_H_
#define NEFFD_DAEMON_S3_REMOTE_ERROR_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace neffd::remote {

enum class RemoteErrorCause {
  kNotFound,           // 404 / NoSuchKey / NoSuchUpload: an answer, not a fault
  kAccessDenied,       // 403, bad or unknown credentials, no credentials
  kThrottled,          // 503 SlowDown, 429
  kTimeout,            // connect or total deadline passed
  kConnectionRefused,  // nothing listening, or the host is unreachable
  kServerError,        // other 5xx, connection dropped mid-answer
  kOther,              // anything else (4xx requests, local I/O, bad answers)
};

inline constexpr int kRemoteErrorCauseCount = 7;

// "not_found", "access_denied", "throttled", "timeout", "connection_refused",
// "server_error", "other": stable names for stats and logs.
absl::string_view RemoteErrorCauseName(RemoteErrorCause cause);

// A status with the code that goes with `cause` and `message`, tagged.
absl::Status RemoteError(RemoteErrorCause cause, absl::string_view message);

// The cause an HTTP error status stands for: 404 kNotFound, 401/403
// kAccessDenied, 429/503 kThrottled (S3 says SlowDown with 503), other 5xx
// kServerError, anything else kOther.
RemoteErrorCause CauseOfHttpStatus(int http_status);

// The cause `status` was tagged with; kOther for an untagged error. Must not
// be called with an OK status.
RemoteErrorCause RemoteErrorCauseOf(const absl::Status& status);

}  // namespace neffd::remote

#endif  // NEFFD_DAEMON_S3_REMOTE_ERROR_H_
