// daemon/server/request_validation.h
//
// The checks every CompileCache request passes before the daemon acts on it:
// pure functions of the request and the limits, with no filesystem or lock
// access, so they can be fuzzed on their own (tests/fuzz/request_fuzzer.cc).
// Each failure is InvalidArgument whose message names the field, e.g.
// "lease_id: is empty". A request that passes names an entry by a parsed
// EntryKey (safe to join under a root) and, for a staged publish, a file
// name directly inside the staging directory.
//
// Thread-safe.
#ifndef NEFFD_DAEMON_SERVER_REQUEST_VALIDATION_H_
#define NEFFD_DAEMON_SERVER_REQUEST_VALIDATION_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "store/entry_id.h"

namespace neffd {

struct RequestLimits {
  uint64_t max_entry_bytes = uint64_t{8} << 30;
  uint64_t max_inline_bytes = uint64_t{16} << 20;
  size_t max_host_bytes = 256;
  // Publish metadata lands in model.done (read back with a 1 MiB bound) and,
  // for key_inputs, compile_flags.json: bounded so no client can write a
  // record that every reader must refuse.
  int max_metadata_entries = 64;
  size_t max_metadata_key_bytes = 128;
  size_t max_metadata_value_bytes = 64 << 10;
  size_t max_metadata_bytes = 256 << 10;
  // Unlock(FAILED)'s log becomes model.log; the client library sends its
  // last max_log_bytes.
  size_t max_log_bytes = 1 << 20;
};

// Non-empty and at most 64 bytes.
absl::Status ValidateLeaseId(absl::string_view lease_id);

// The entry and holder of a Lock request.
absl::StatusOr<EntryKey> ValidateLockRequest(const v1::LockRequest& request,
                                             const RequestLimits& limits);

// Everything of a Publish request but the staged file itself: entry, lease,
// sha256, size against the limits, exactly one content, metadata count and
// sizes, and
// for a staged file its path (see ValidateStagedPath).
absl::StatusOr<EntryKey> ValidatePublishRequest(
    const v1::PublishRequest& request, const RequestLimits& limits,
    const std::string& staging_dir);

// Entry, lease, outcome and log size of an Unlock request.
absl::StatusOr<EntryKey> ValidateUnlockRequest(const v1::UnlockRequest& request,
                                               const RequestLimits& limits);

// OK when `path` is "{staging_dir}/{name}" with `name` a valid token (so no
// '/', never "." or ".."). The file itself is checked when it is opened.
absl::Status ValidateStagedPath(const std::string& staging_dir,
                                const std::string& path);

}  // namespace neffd

#endif  // NEFFD_DAEMON_SERVER_REQUEST_VALIDATION_H_
