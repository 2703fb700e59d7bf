// daemon/service/maintenance.h
//
// Maintenance carries out the operator commands on the shared store and the
// index: evict one entry, verify entries, garbage-collect least-recently-used
// entries under a size or age goal, and import an existing libneuronxla-style
// cache. It never removes an entry whose lease is out on this host, that
// holds a lock file (some host is compiling it), or that was served here
// within the last `recent`; removal renames the entry out of the way before
// deleting it, so a reader that already opened the artifact finishes.
//
// Thread-safe; long operations report progress through a callback and may
// run concurrently with lookups and publishes.
#ifndef NEFFD_DAEMON_SERVICE_MAINTENANCE_H_
#define NEFFD_DAEMON_SERVICE_MAINTENANCE_H_

#include <functional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "daemon/index/catalog.h"
#include "proto/neffd/v1/neffd.pb.h"

namespace neffd {

struct MaintenanceOptions {
  std::function<absl::Time()> now = [] { return absl::Now(); };
  // Entries served this recently are never collected.
  absl::Duration recent = absl::Minutes(1);
  // Import: a lock file older than this (by the store's clock) is stale.
  absl::Duration stale_lock_age = absl::Seconds(1200);
  // Called after an entry is evicted; the daemon drops the host's local
  // (tier) copy there.
  std::function<void(const EntryKey&)> on_evict = [](const EntryKey&) {};
  // True while a lease on the key is out on this host.
  std::function<bool(const EntryKey&)> lease_out = [](const EntryKey&) {
    return false;
  };
};

class Maintenance {
 public:
  Maintenance(MaintenanceOptions options, Catalog* catalog);

  // FailedPrecondition while the entry is being compiled here or elsewhere.
  absl::StatusOr<v1::EvictResponse> Evict(const EntryKey& id);

  // Re-hashes every entry of `ns` (in this host's index, or with `all` in the
  // store); calls `progress` now and then and once with `finished`.
  absl::Status Verify(
      Namespace ns, bool all,
      const std::function<void(const v1::VerifyProgress&)>& progress);

  absl::StatusOr<v1::GcResponse> Gc(Namespace ns, const v1::GcRequest& request);

  // Indexes what is in the store of `ns` (see ImportProgress for the counts).
  absl::Status Import(
      Namespace ns, bool clear_stale_locks,
      const std::function<void(const v1::ImportProgress&)>& progress);

 private:
  const MaintenanceOptions options_;
  Catalog* const catalog_;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_SERVICE_MAINTENANCE_H_
