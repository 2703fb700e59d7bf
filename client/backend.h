// client/backend.h (internal to the client library)
//
// The get-or-compile protocol (Lookup and Lock, then Publish or give the
// lease back) has two implementations: DaemonBackend speaks to neffd over gRPC;
// FilesystemBackend runs it directly on the cache directories (fallback mode:
// flock on the daemon's lock files, atomic publish through store/'s
// Store). CacheClient drives either one the same way.
//
// Status conventions, for every method of both:
//   Unavailable         the daemon cannot be reached (down, restarting).
//   FailedPrecondition  (Lease methods) the lease is no longer held: it was
//                       revoked, or its daemon restarted.
//   InvalidArgument     the request itself is wrong; not retried.
// Anything else is an I/O error, the daemon's or a local one (disk full...).
// A caller may run any failed daemon call again on the filesystem.
//
// Backends and leases are thread-safe; a lease is used by one thread.
#ifndef NEFFD_CLIENT_BACKEND_H_
#define NEFFD_CLIENT_BACKEND_H_

#include <map>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "store/digest.h"
#include "store/entry_id.h"

namespace neffd {

// The right to compile and publish one entry. Destroying a lease that was
// neither published nor failed abandons it (nothing is recorded).
class Lease {
 public:
  virtual ~Lease() = default;

  // What becomes of the published file at `path`.
  enum class FileAfterPublish {
    kKept,        // stays at `path`, whatever happens
    kMayBeTaken,  // may be gone after a successful publish (moved into the
                  // cache instead of copied); back at `path` on any error
  };

  // Installs the whole file `path` (with `content`'s size and sha256) as the
  // entry, with `metadata` in its done record, and ends the lease.
  virtual absl::StatusOr<v1::Entry> Publish(
      const std::string& path, const CopyResult& content,
      const std::map<std::string, std::string>& metadata,
      FileAfterPublish after) = 0;

  // Records a deterministic compile failure with the compiler's `log` and
  // ends the lease; returns the failure as waiters see it (with its
  // retry-after time).
  virtual absl::StatusOr<v1::Failure> Fail(const std::string& log) = 0;
};

struct LockAnswer {
  v1::LockResponse::Outcome outcome = v1::LockResponse::OUTCOME_UNSPECIFIED;
  std::unique_ptr<Lease> lease;  // GRANTED
  v1::Entry entry;               // READY
  v1::Failure failure;           // FAILED
  // READY or FAILED from what was recorded when asked: a Lookup would have
  // said HIT or FAILED; nobody was waited for.
  bool at_once = false;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // HIT (verified entry), MISS or FAILED (a recorded failure in force).
  virtual absl::StatusOr<v1::LookupResponse> Lookup(const EntryKey& id) = 0;

  // GRANTED, READY, FAILED, or (after `wait` has passed, or at once when
  // wait is zero) TIMED_OUT / BUSY.
  virtual absl::StatusOr<LockAnswer> Lock(const EntryKey& id,
                                          absl::Duration wait) = 0;

  // Lookup, then Lock on a miss, as one call (get-or-compile): an entry or
  // failure already recorded is READY or FAILED with `at_once`, and counts
  // as a Lookup wherever lookups are counted. Lock answers recorded entries
  // first anyway, so by default this is Lock.
  virtual absl::StatusOr<LockAnswer> LookupOrLock(const EntryKey& id,
                                                  absl::Duration wait) {
    return Lock(id, wait);
  }
};

}  // namespace neffd

#endif  // NEFFD_CLIENT_BACKEND_H_
