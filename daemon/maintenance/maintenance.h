// daemon/maintenance/maintenance.h
//
// Maintenance carries out the operator commands on the shared store and the
// index: evict one entry, verify entries, garbage-collect least-recently-used
// entries under a size or age goal, and import an existing libneuronxla-style
// cache. It never removes an entry whose lease is out on this host, that
// holds a lock file (some host is compiling it), or that was served here
// within the last `recent` here or (per the hosts' access journals) on any
// host; removal renames the entry out of the way before
// deleting it, so a reader that already opened the artifact finishes.
//
// Thread-safe; long operations report progress through a callback and may
// run concurrently with lookups and publishes.
#ifndef NEFFD_DAEMON_MAINTENANCE_MAINTENANCE_H_
#define NEFFD_DAEMON_MAINTENANCE_MAINTENANCE_H_

#include <functional>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "config/defaults.h"
#include "daemon/index/catalog.h"
#include "daemon/maintenance/gc_plan.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "store/env.h"

namespace neffd {

struct MaintenanceOptions {
  Env* env = Env::Default();  // the clock
  // Entries served this recently are never collected.
  absl::Duration recent = absl::Minutes(1);
  // Import: a lock file older than this (by the store's clock) is stale.
  absl::Duration stale_lock_age = config::kLockTimeout;
  // Called after an entry is evicted; the daemon drops the host's local
  // (tier) copy there.
  std::function<void(const EntryKey&)> on_evict = [](const EntryKey&) {};
  // Gc's bounds on what is not an entry: temp files of interrupted publishes
  // older than this are removed; quarantine/ and .trash/ are kept within
  // their bounds (Store::SweepAside).
  absl::Duration temp_grace = config::kTempGrace;
  AsideBounds quarantine = {config::kQuarantineAge, config::kQuarantineBytes};
  AsideBounds trash = {config::kTrashAge, config::kTrashBytes};
  // True while a lease on the key is out on this host.
  std::function<bool(const EntryKey&)> lease_out = [](const EntryKey&) {
    return false;
  };
};

// What a gc run knows beyond this host (daemon/cluster/gc_coordinator.h).
struct GcScope {
  // The latest use of entries on other hosts, by "{compiler_version}/{key}"
  // (daemon/cluster/access_journal.h).
  absl::flat_hash_map<std::string, absl::Time> last_uses;
  uint64_t journals_read = 0;
  // How far a journal's time may lag the use it records: entries whose
  // journaled use is within recent + lag are still in use.
  absl::Duration lag;
  // Uses within one `grain` are indistinguishable in the journals, so such
  // entries are equally cold and the cheapest to compile goes first.
  absl::Duration grain = absl::ZeroDuration();
  // Asked before each removal; false stops the run (the lease was lost).
  std::function<bool()> still_held = [] { return true; };
  std::string lease_host;
  std::string lease_id;
};

class Maintenance {
 public:
  Maintenance(MaintenanceOptions options, Catalog* catalog);

  // FailedPrecondition while the entry is being compiled here or elsewhere,
  // and with `failure_only` when the key has an entry (not a failure).
  absl::StatusOr<v1::EvictResponse> Evict(const EntryKey& id,
                                          bool failure_only = false);

  // Re-hashes every entry of `ns` (in this host's index, or with `all` in the
  // store); calls `progress` now and then and once with `finished`.
  absl::Status Verify(
      Namespace ns, bool all,
      const std::function<void(const v1::VerifyProgress&)>& progress);

  // Removes the coldest entries (by `scope`'s uses on any host and this
  // host's own) until the request's goals hold; see GcScope for the order.
  // Every run also removes leftovers past their bounds (MaintenanceOptions:
  // old temp files, quarantine/ and .trash/ over age or size, records left
  // without their artifact by a cache clear) and records artifacts no record
  // describes (an unmodified rank's), which it orders with the rest; the
  // response counts them. Aborted if scope.still_held turns false mid-run.
  absl::StatusOr<v1::GcResponse> Gc(Namespace ns, const v1::GcRequest& request,
                                    const GcScope& scope = GcScope());

  // Moves entries of the layout before TorchNeuron's into it, then indexes
  // what is in the store of `ns` (see ImportProgress for the counts).
  absl::Status Import(
      Namespace ns, bool clear_stale_locks,
      const std::function<void(const v1::ImportProgress&)>& progress);

 private:
  // Applies the quarantine/ and .trash/ bounds to `store`, counting into
  // `removed` and `kept`.
  absl::Status SweepAside(Store& store, absl::Time now, bool dry_run,
                          v1::Leftovers* removed, v1::Leftovers* kept);

  const MaintenanceOptions options_;
  Catalog* const catalog_;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_MAINTENANCE_MAINTENANCE_H_
