#include "daemon/s3/remote_error.h"

#include "absl/strings/cord.h"

namespace neffd::remote {
namespace {

constexpr char kCauseTypeUrl[] = "type.neffd/remote_error_cause";

constexpr RemoteErrorCause kAllCauses[] = {
    RemoteErrorCause::kNotFound,
    RemoteErrorCause::kAccessDenied,
    RemoteErrorCause::kThrottled,
    RemoteErrorCause::kTimeout,
    RemoteErrorCause::kConnectionRefused,
    RemoteErrorCause::kServerError,
    RemoteErrorCause::kOther,
};

absl::StatusCode CodeFor(RemoteErrorCause cause) {
  switch (cause) {
    case RemoteErrorCause::kNotFound:
      return absl::StatusCode::kNotFound;
    case RemoteErrorCause::kAccessDenied:
      return absl::StatusCode::kPermissionDenied;
    case RemoteErrorCause::kThrottled:
      return absl::StatusCode::kResourceExhausted;
    case RemoteErrorCause::kTimeout:
      return absl::StatusCode::kDeadlineExceeded;
    case RemoteErrorCause::kConnectionRefused:
    case RemoteErrorCause::kServerError:
      return absl::StatusCode::kUnavailable;
    case RemoteErrorCause::kOther:
      break;
  }
  return absl::StatusCode::kUnknown;
}

}  // namespace

absl::string_view RemoteErrorCauseName(RemoteErrorCause cause) {
  switch (cause) {
    case RemoteErrorCause::kNotFound:
      return "not_found";
    case RemoteErrorCause::kAccessDenied:
      return "access_denied";
    case RemoteErrorCause::kThrottled:
      return "throttled";
    case RemoteErrorCause::kTimeout:
      return "timeout";
    case RemoteErrorCause::kConnectionRefused:
      return "connection_refused";
    case RemoteErrorCause::kServerError:
      return "server_error";
    case RemoteErrorCause::kOther:
      break;
  }
  return "other";
}

absl::Status RemoteError(RemoteErrorCause cause, absl::string_view message) {
  absl::Status status(CodeFor(cause), message);
  status.SetPayload(kCauseTypeUrl, absl::Cord(RemoteErrorCauseName(cause)));
  return status;
}

RemoteErrorCause CauseOfHttpStatus(int http_status) {
  if (http_status == 404) return RemoteErrorCause::kNotFound;
  if (http_status == 401 || http_status == 403) {
    return RemoteErrorCause::kAccessDenied;
  }
  if (http_status == 429 || http_status == 503) {
    return RemoteErrorCause::kThrottled;
  }
  if (http_status >= 500) return RemoteErrorCause::kServerError;
  return RemoteErrorCause::kOther;
}

RemoteErrorCause RemoteErrorCauseOf(const absl::Status& status) {
  auto payload = status.GetPayload(kCauseTypeUrl);
  if (payload.has_value()) {
    for (RemoteErrorCause cause : kAllCauses) {
      if (*payload == RemoteErrorCauseName(cause)) return cause;
    }
  }
  return RemoteErrorCause::kOther;
}

}  // namespace neffd::remote
