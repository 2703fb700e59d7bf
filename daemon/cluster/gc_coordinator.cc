#include "daemon/cluster/gc_coordinator.h"

#include <algorithm>
#include <vector>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "daemon/locks/file_locks.h"
#include "daemon/locks/lock_files.h"
#include "daemon/log/log.h"
#include "store/file_util.h"

namespace neffd {
namespace {

// Not "*.lock": `neuron_parallel_compile --command clear-locks` deletes
// those.
constexpr char kGcLeaseName[] = ".neffd-gc.lease";
constexpr absl::Duration kTick = absl::Milliseconds(100);
// Checking the lease costs two stats; during a run, once a second is enough
// to stop well within the TTL after losing it.
constexpr absl::Duration kHeldCheckEvery = absl::Seconds(1);

// The gc lease rides on the entry-lease protocol, which names holds by
// EntryKey; this one stands for "the whole store of `ns`".
EntryKey StoreKey(Namespace ns) {
  return *EntryKey::Parse(NamespaceName(ns), "gc", "store");
}

std::string NewLeaseId() {
  thread_local absl::BitGen bits;
  return absl::StrFormat("gc-%016x", absl::Uniform<uint64_t>(bits));
}

}  // namespace

GcCoordinator::GcCoordinator(GcCoordinatorOptions options, Catalog* catalog,
                             Maintenance* maintenance)
    : options_(std::move(options)),
      catalog_(catalog),
      maintenance_(maintenance) {
  FileLocksOptions lease;
  lease.locks_dir = options_.locks_dir;
  lease.shared = true;
  lease.host_id = options_.host_id;
  lease.stale_after = options_.lease_ttl;
  // Contenders look once per gc turn, not per poll: the whole TTL must pass
  // unchanged before the lease is broken.
  lease.poll_interval = absl::ZeroDuration();
  lease.entry_dir = [catalog](const EntryKey& id) {
    return catalog->StoreFor(id).root();
  };
  lease.lease_file_name = kGcLeaseName;
  lease.shared_env = options_.shared_env;
  // Whether a contender's lease has stood unchanged for the TTL is judged
  // on this host's clock.
  lease.env = options_.host_env;
  leases_ = NewFileLocks(std::move(lease));
  for (Namespace ns : {Namespace::kNeff, Namespace::kHlo}) {
    AccessJournalOptions journal;
    journal.root = catalog->StoreFor(ns).root();
    journal.ns = ns;
    journal.host_id = options_.host_id;
    journal.grain = options_.journal_grain;
    journal.min_spacing = options_.journal_min_spacing;
    journal.catalog_flush = options_.access_flush_period;
    journal.env = options_.shared_env;
    (ns == Namespace::kNeff ? neff_journal_ : hlo_journal_) =
        std::make_unique<AccessJournal>(std::move(journal));
  }
}

GcCoordinator::~GcCoordinator() { Stop(); }

void GcCoordinator::Start() {
  keeper_ = options_.host_env->StartThread("neffd-gc-lease",
                                           [this] { KeepLeases(); });
  runner_ =
      options_.host_env->StartThread("neffd-gc", [this] { RunPeriodically(); });
}

void GcCoordinator::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  runner_.Join();
  keeper_.Join();
  // A clean shutdown hands the lease over at once rather than after the TTL.
  for (Namespace ns : {Namespace::kNeff, Namespace::kHlo}) Release(ns);
  for (Namespace ns : {Namespace::kNeff, Namespace::kHlo}) {
    (void)JournalFor(ns).Flush(options_.host_env->Now(), /*force=*/true);
  }
}

void GcCoordinator::NoteAccess(
    const absl::flat_hash_map<std::string, absl::Time>& batch) {
  neff_journal_->Note(batch);
  hlo_journal_->Note(batch);
}

std::string GcCoordinator::Holder(Namespace ns) const {
  absl::StatusOr<std::string> text = ReadSmallFile(
      absl::StrCat(catalog_->StoreFor(ns).root(), "/", kGcLeaseName), 4096);
  if (!text.ok()) return "";
  std::vector<std::string> f =
      absl::StrSplit(*text, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  if (f.size() < 3) return absl::StrCat("unknown (", kGcLeaseName, ")");
  return absl::StrCat("host ", f[0], " (pid ", f[1], ", lease ", f[2], ")");
}

absl::StatusOr<std::string> GcCoordinator::Acquire(Namespace ns) {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(ns);
  if (it != held_.end()) {
    if (it->second.lock->StillHeld()) return it->second.lease_id;
    log::Warning("gc_lease_lost", {{"ns", NamespaceName(ns)},
                                   {"lease_id", it->second.lease_id}});
    held_.erase(it);
  }
  const std::string lease_id = NewLeaseId();
  std::unique_ptr<ExternalLock> taken =
      leases_->TryTake(StoreKey(ns), lease_id);
  if (taken == nullptr) {
    const std::string holder = Holder(ns);
    return absl::AbortedError(absl::StrCat(
        "the gc lease of ", catalog_->StoreFor(ns).root(), " is held by ",
        holder.empty() ? "another process" : holder,
        "; that host runs gc for the whole store (run neffctl gc there, or "
        "retry after its lease expires)"));
  }
  held_[ns] = Held{std::move(taken), lease_id, options_.host_env->Now()};
  log::Info("gc_lease_taken",
            {{"ns", NamespaceName(ns)}, {"lease_id", lease_id}});
  return lease_id;
}

void GcCoordinator::Release(Namespace ns) {
  absl::MutexLock lock(&mu_);
  held_.erase(ns);  // FileLock's destructor unlinks the file if still ours
}

bool GcCoordinator::StillHolding(Namespace ns) {
  absl::MutexLock lock(&mu_);
  auto it = held_.find(ns);
  return it != held_.end() && it->second.lock->StillHeld();
}

absl::StatusOr<v1::GcResponse> GcCoordinator::Run(Namespace ns,
                                                  const v1::GcRequest& request,
                                                  const std::string& lease_id) {
  GcScope scope;
  scope.last_uses =
      AccessJournal::ReadAll(catalog_->StoreFor(ns).root(), options_.host_id,
                             &scope.journals_read, options_.shared_env);
  scope.lag = JournalFor(ns).lag();
  scope.grain = options_.journal_grain;
  scope.lease_host = options_.host_id;
  scope.lease_id = lease_id;
  absl::Time checked = options_.host_env->Now();
  scope.still_held = [this, ns, &checked] {
    if (options_.host_env->Now() - checked < kHeldCheckEvery) return true;
    checked = options_.host_env->Now();
    return StillHolding(ns);
  };
  const absl::Time start = options_.host_env->Now();
  log::Info("gc_start", {{"ns", NamespaceName(ns)},
                         {"host", options_.host_id},
                         {"lease_id", lease_id},
                         {"start_unix_ms", absl::ToUnixMillis(start)}});
  absl::StatusOr<v1::GcResponse> done = maintenance_->Gc(ns, request, scope);
  const absl::Time end = options_.host_env->Now();
  if (done.ok() && !request.dry_run()) {
    absl::MutexLock lock(&mu_);
    last_sweep_[ns] = LastSweep{done->leftovers_after(), end};
  }
  log::Info("gc_end",
            {{"ns", NamespaceName(ns)},
             {"host", options_.host_id},
             {"lease_id", lease_id},
             {"start_unix_ms", absl::ToUnixMillis(start)},
             {"end_unix_ms", absl::ToUnixMillis(end)},
             {"ok", done.ok()},
             {"removed_entries", done.ok() ? done->removed_entries() : 0},
             {"removed_bytes", done.ok() ? done->removed_bytes() : 0},
             {"bytes_after", done.ok() ? done->bytes_after() : 0},
             {"skipped_recent", done.ok() ? done->skipped_recent() : 0},
             {"temp_files_removed",
              done.ok() ? done->leftovers_removed().temp_files() : 0},
             {"quarantine_entries_removed",
              done.ok() ? done->leftovers_removed().quarantine_entries() : 0},
             {"trash_entries_removed",
              done.ok() ? done->leftovers_removed().trash_entries() : 0},
             {"journals_read", scope.journals_read}});
  return done;
}

absl::StatusOr<v1::GcResponse> GcCoordinator::RunNow(
    Namespace ns, const v1::GcRequest& request) {
  absl::MutexLock run(&run_mu_);
  const uint64_t lock_files_removed =
      ns == Namespace::kNeff ? SweepLockFiles() : 0;
  absl::StatusOr<std::string> lease_id = Acquire(ns);
  if (!lease_id.ok()) return lease_id.status();
  absl::StatusOr<v1::GcResponse> done = Run(ns, request, *lease_id);
  if (done.ok()) done->set_lock_files_removed(lock_files_removed);
  // Periodic runs sweep every store, so this host keeps the lease it took
  // and is the store's sweeper from now on (as its periodic runner would
  // have made it at its next turn).
  return done;
}

void GcCoordinator::KeepLeases() {
  // Relative sleeps (see daemon.cc's ticker): a skewed wall clock must not
  // stall the refresh.
  while (!stop_.HasBeenNotified()) {
    options_.host_env->SleepFor(kTick);
    const absl::Time now = options_.host_env->Now();
    {
      absl::MutexLock lock(&mu_);
      for (auto& [ns, held] : held_) {
        if (now - held.refreshed < options_.lease_ttl / 3) continue;
        held.lock->Refresh();
        held.refreshed = now;
      }
    }
    for (Namespace ns : {Namespace::kNeff, Namespace::kHlo}) {
      if (absl::Status s = JournalFor(ns).Flush(now); !s.ok()) {
        log::Warning("access_journal_write_failed",
                     {{"path", JournalFor(ns).path()}, {"error", s.message()}});
      }
    }
  }
}

void GcCoordinator::RunPeriodically() {
  absl::Time next = options_.host_env->Now() + options_.interval;
  while (!stop_.HasBeenNotified()) {
    options_.host_env->SleepFor(kTick);
    if (options_.host_env->Now() < next) continue;
    next = options_.host_env->Now() + options_.interval;
    absl::MutexLock run(&run_mu_);
    // The lock directory is this host's: swept at every turn, whoever holds
    // the store's gc lease.
    SweepLockFiles();
    for (Namespace ns : {Namespace::kNeff, Namespace::kHlo}) {
      v1::GcRequest request;
      if (ns == Namespace::kNeff) {
        request.set_max_size_bytes(options_.max_size_bytes);
      }
      absl::StatusOr<std::string> lease_id = Acquire(ns);
      if (!lease_id.ok()) {
        log::Info("gc_skipped",
                  {{"ns", NamespaceName(ns)}, {"holder", Holder(ns)}});
        continue;
      }
      absl::StatusOr<v1::GcResponse> done = Run(ns, request, *lease_id);
      if (!done.ok()) {
        log::Error("gc_failed", {{"ns", NamespaceName(ns)},
                                 {"error", done.status().message()}});
      }
    }
  }
}

uint64_t GcCoordinator::SweepLockFiles() {
  if (options_.host_locks_dir.empty()) return 0;
  const uint64_t removed =
      RemoveUnheldLockFiles(options_.host_locks_dir, options_.host_env);
  if (removed > 0) {
    log::Info("lock_files_removed",
              {{"dir", options_.host_locks_dir}, {"removed", removed}});
  }
  return removed;
}

v1::Leftovers GcCoordinator::Leftovers(absl::Time* measured) const {
  v1::Leftovers sum;
  *measured = absl::InfinitePast();
  absl::MutexLock lock(&mu_);
  for (const auto& [ns, last] : last_sweep_) {
    const v1::Leftovers& l = last.left;
    sum.set_temp_files(sum.temp_files() + l.temp_files());
    sum.set_temp_bytes(sum.temp_bytes() + l.temp_bytes());
    sum.set_quarantine_entries(sum.quarantine_entries() +
                               l.quarantine_entries());
    sum.set_quarantine_bytes(sum.quarantine_bytes() + l.quarantine_bytes());
    sum.set_trash_entries(sum.trash_entries() + l.trash_entries());
    sum.set_trash_bytes(sum.trash_bytes() + l.trash_bytes());
    *measured = std::max(*measured, last.when);
  }
  return sum;
}

}  // namespace neffd
