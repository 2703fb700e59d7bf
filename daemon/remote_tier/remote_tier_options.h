// daemon/remote_tier/remote_tier_options.h
//
// What the daemon's flags say about the S3 tier (--remote, --s3_endpoint,
// --s3_region, --remote_mode, the deadlines and the breaker), as one value
// type that daemon/flags.cc fills and daemon/remote_tier/remote_tier.h
// consumes. Off when `url` is empty.
//
// Thread-safe (a value type).
#ifndef NEFFD_DAEMON_REMOTE_TIER_REMOTE_TIER_OPTIONS_H_
#define NEFFD_DAEMON_REMOTE_TIER_REMOTE_TIER_OPTIONS_H_

#include <cstdint>
#include <string>

#include "absl/time/time.h"

namespace neffd {

struct RemoteTierOptions {
  // "s3://BUCKET/PREFIX"; empty: no remote tier.
  std::string url;
  // Empty: AWS's regional endpoint.
  std::string endpoint;
  std::string region = "us-east-1";
  // ro: read-through only; nothing is queued or uploaded.
  bool read_only = false;
  absl::Duration connect_timeout = absl::Seconds(2);
  // Bounds one request: a whole GET of a NEFF, one part of an upload.
  absl::Duration request_timeout = absl::Seconds(60);
  // Bounds the model.done GET every miss makes, so a stalled S3 costs a
  // miss at most this long.
  absl::Duration lookup_timeout = absl::Seconds(2);
  uint64_t part_size = uint64_t{16} << 20;
  uint64_t multipart_threshold = uint64_t{64} << 20;
  int upload_concurrency = 4;
  int breaker_failures = 5;
  absl::Duration breaker_backoff = absl::Seconds(5);
  absl::Duration breaker_max_backoff = absl::Minutes(5);

  bool enabled() const { return !url.empty(); }
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_REMOTE_TIER_REMOTE_TIER_OPTIONS_H_
