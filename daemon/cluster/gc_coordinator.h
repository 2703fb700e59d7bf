// daemon/cluster/gc_coordinator.h
//
// GcCoordinator makes gc a per-store job when many hosts share one store
// (docs/ARCHITECTURE.md, "Cluster gc"):
//
//  - One evictor at a time. Collecting a store requires its gc lease,
//    {root}/.neffd-gc.lease, taken and kept with the same lease-file protocol
//    as an entry's compile lease (daemon/locks/file_locks.h: O_EXCL create,
//    mtime refreshed every TTL/3, broken once seen unchanged for the TTL). A
//    host with periodic gc keeps the lease between runs, so a store is listed
//    once per interval however many hosts share it; the other hosts' turns are
//    skipped (logged as gc_skipped with the holder). A holder that dies is
//    replaced at the first turn of another host after the TTL.
//  - Recency across hosts. Each host keeps an AccessJournal per store; a run
//    reads every host's journal once and never removes an entry used within
//    --gc_recent_seconds (plus the journals' lag) on any host.
//  - Runs are logged as gc_start / gc_end with the lease id and wall-clock
//    times, so overlapping runs would be visible in the logs.
//  - RunNow (neffctl gc) takes the same lease or fails with Aborted naming
//    the holder (a conflict with another host, not a bad request).
//  - Every host sweeps its own lock directory at each turn, lease or not:
//    TorchNeuron ranks leave a lock file per key and never delete it, so
//    the ones nobody holds are removed (daemon/locks/lock_files.h).
//  - Periodic runs happen with or without a size goal: every run sweeps the
//    store's leftovers (temp files of crashed publishes, quarantine/,
//    .trash/; Maintenance::Gc), so a store never grows in the dark. The
//    neff store is collected down to `max_size_bytes` when set; the hlo
//    store only has its leftovers swept.
//
// Thread-safe. Start() launches two threads (lease keeper and periodic
// runner); Stop() joins them and releases held leases.
#ifndef NEFFD_DAEMON_CLUSTER_GC_COORDINATOR_H_
#define NEFFD_DAEMON_CLUSTER_GC_COORDINATOR_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "daemon/cluster/access_journal.h"
#include "daemon/index/catalog.h"
#include "daemon/locks/lock_table.h"
#include "daemon/maintenance/maintenance.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "store/env.h"

namespace neffd {

struct GcCoordinatorOptions {
  std::string host_id;
  // Host-local directory for the gc lease's flock (excludes this host's own
  // runs across daemon restarts, like an entry's lock file).
  std::string locks_dir;
  absl::Duration lease_ttl = absl::Seconds(30);
  // Periodic gc every `interval`: the neff store down to `max_size_bytes`
  // (0: no size goal), and both stores' leftovers.
  uint64_t max_size_bytes = 0;
  absl::Duration interval = absl::Minutes(10);
  absl::Duration journal_grain = absl::Minutes(10);
  absl::Duration journal_min_spacing = absl::Seconds(10);
  // How often the Catalog flushes access times (Catalog::FlushAccessTimes).
  absl::Duration access_flush_period = absl::Seconds(10);
  // The shared store's filesystem (lease and journals); not owned. The
  // daemon passes the CountingEnv it reports store metadata operations of.
  Env* shared_env = Env::Default();
  // This host's lock directory ({local_dir}/locks): lock files nobody holds
  // are removed at every turn and by RunNow (empty: never); not owned.
  std::string host_locks_dir;
  // This host's filesystem and the coordinator's clock: every time read
  // and sleep (lease refresh, the periodic turn, gc's recorded times) goes
  // through it, so a test can run them on a manual clock; not owned.
  Env* host_env = Env::Default();
};

class GcCoordinator {
 public:
  GcCoordinator(GcCoordinatorOptions options, Catalog* catalog,
                Maintenance* maintenance);
  ~GcCoordinator();

  void Start();
  void Stop();

  // The Catalog's access observer (Catalog::SetAccessObserver).
  void NoteAccess(const absl::flat_hash_map<std::string, absl::Time>& batch);

  // An operator's gc: under this store's gc lease, or Aborted naming the
  // host that holds it.
  absl::StatusOr<v1::GcResponse> RunNow(Namespace ns,
                                        const v1::GcRequest& request);

  // "host H (pid P, lease L)" for the lease file of `ns`'s store, or "".
  std::string Holder(Namespace ns) const;

  // What this host's last run of each store left (Stats.leftovers), summed
  // over the stores, and when the latest of those runs ended
  // (InfinitePast: none yet).
  v1::Leftovers Leftovers(absl::Time* measured) const;

 private:
  struct Held {
    std::unique_ptr<ExternalLock> lock;
    std::string lease_id;
    absl::Time refreshed;
  };

  // The lease id if this host holds (or now took) `ns`'s gc lease.
  absl::StatusOr<std::string> Acquire(Namespace ns);
  void Release(Namespace ns);
  bool StillHolding(Namespace ns);
  absl::StatusOr<v1::GcResponse> Run(Namespace ns, const v1::GcRequest& request,
                                     const std::string& lease_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(run_mu_);
  void KeepLeases();
  void RunPeriodically();
  // RemoveUnheldLockFiles on host_locks_dir (daemon/locks/lock_files.h).
  uint64_t SweepLockFiles() ABSL_EXCLUSIVE_LOCKS_REQUIRED(run_mu_);
  AccessJournal& JournalFor(Namespace ns) {
    return ns == Namespace::kNeff ? *neff_journal_ : *hlo_journal_;
  }

  const GcCoordinatorOptions options_;
  Catalog* const catalog_;
  Maintenance* const maintenance_;
  std::unique_ptr<ExternalLocks> leases_;
  std::unique_ptr<AccessJournal> neff_journal_;
  std::unique_ptr<AccessJournal> hlo_journal_;

  absl::Mutex run_mu_;  // one run at a time on this host
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Namespace, Held> held_ ABSL_GUARDED_BY(mu_);
  struct LastSweep {
    v1::Leftovers left;
    absl::Time when;
  };
  absl::flat_hash_map<Namespace, LastSweep> last_sweep_ ABSL_GUARDED_BY(mu_);

  absl::Notification stop_;
  EnvThread keeper_;
  EnvThread runner_;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_CLUSTER_GC_COORDINATOR_H_
