// proto/remote_error_causes.h
//
// The one list of the causes neffd.v1.Stats counts failed S3 calls by
// (docs/REMOTE.md): each cause's name and its `remote_errors_{name}` field.
// The daemon fills the fields by these names, the same names its log and
// S3 client use (daemon/s3/remote_error.h), and the Prometheus exposition
// has one `neffd_remote_errors_total{cause="name"}` series per cause
// (`neffctl stats` shows the fields as their StatMetric rows declare: each
// cause that failed as "name=count"). A cause is added here and as a field
// of Stats in neffd.proto, whose row is the name
// (remote_error_causes_test checks that they agree).
//
// The daemon's S3 client and its metrics depend on this library, so it
// depends on the wire messages only. The order is the exposition's; names
// never change, dashboards and alerts use them.
//
// Thread-safe (constant data, pure functions).
#ifndef NEFFD_PROTO_REMOTE_ERROR_CAUSES_H_
#define NEFFD_PROTO_REMOTE_ERROR_CAUSES_H_

#include <cstdint>

#include "absl/strings/string_view.h"
#include "proto/neffd/v1/neffd.pb.h"

namespace neffd {

struct RemoteErrorCauseField {
  absl::string_view name;
  uint64_t (v1::Stats::*get)() const;
  void (v1::Stats::*set)(uint64_t);
};

inline constexpr RemoteErrorCauseField kRemoteErrorCauses[] = {
    {"access_denied", &v1::Stats::remote_errors_access_denied,
     &v1::Stats::set_remote_errors_access_denied},
    {"throttled", &v1::Stats::remote_errors_throttled,
     &v1::Stats::set_remote_errors_throttled},
    {"timeout", &v1::Stats::remote_errors_timeout,
     &v1::Stats::set_remote_errors_timeout},
    {"connection_refused", &v1::Stats::remote_errors_connection_refused,
     &v1::Stats::set_remote_errors_connection_refused},
    {"server_error", &v1::Stats::remote_errors_server_error,
     &v1::Stats::set_remote_errors_server_error},
    {"other", &v1::Stats::remote_errors_other,
     &v1::Stats::set_remote_errors_other},
};

// The cause called `name`, or nullptr: a cause Stats does not count (S3's
// "not_found" is an answer, not an error).
inline const RemoteErrorCauseField* FindRemoteErrorCause(
    absl::string_view name) {
  for (const RemoteErrorCauseField& cause : kRemoteErrorCauses) {
    if (cause.name == name) return &cause;
  }
  return nullptr;
}

// Failed S3 calls of every cause.
inline uint64_t RemoteErrorsTotal(const v1::Stats& stats) {
  uint64_t total = 0;
  for (const RemoteErrorCauseField& cause : kRemoteErrorCauses) {
    total += (stats.*cause.get)();
  }
  return total;
}

}  // namespace neffd

#endif  // NEFFD_PROTO_REMOTE_ERROR_CAUSES_H_
