#include "daemon/maintenance/maintenance.h"

#include <algorithm>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "daemon/cluster/access_journal.h"
#include "store/done_record.h"
#include "store/file_util.h"

namespace neffd {
namespace {

constexpr uint64_t kProgressEvery = 256;

}  // namespace

Maintenance::Maintenance(MaintenanceOptions options, Catalog* catalog)
    : options_(std::move(options)), catalog_(catalog) {}

absl::StatusOr<v1::EvictResponse> Maintenance::Evict(const EntryKey& id,
                                                     bool failure_only) {
  Store& store = catalog_->StoreFor(id);
  EntryState state = store.Inspect(id);
  if (options_.lease_out(id) || !state.lock_files.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("id: ", id.Canonical(),
                     " is being compiled (a lease is out); evict it later"));
  }
  v1::EvictResponse response;
  if (failure_only && (state.has_artifact || state.has_done)) {
    return absl::FailedPreconditionError(
        absl::StrCat("id: ", id.Canonical(),
                     " is cached, not a recorded failure (neffctl evict "
                     "removes an entry)"));
  }
  if (failure_only && !state.has_log) return response;  // nothing to forget
  if (state.exists) {
    if (absl::Status s = store.Remove(id); !s.ok()) return s;
    response.set_removed_entry(state.has_artifact || state.has_done);
    response.set_removed_failure(state.has_log);
  }
  if (absl::Status s = catalog_->Forget(id); !s.ok()) return s;
  options_.on_evict(id);
  return response;
}

absl::Status Maintenance::Verify(
    Namespace ns, bool all,
    const std::function<void(const v1::VerifyProgress&)>& progress) {
  Store& store = catalog_->StoreFor(ns);
  std::vector<EntryKey> ids;
  if (all) {
    absl::Status listed = store.ForEachEntry([&](const EntryKey& id) {
      ids.push_back(id);
      return true;
    });
    if (!listed.ok()) return listed;
  } else {
    catalog_->index().ForEach([&](const EntryKey& id, const v1::IndexRecord&) {
      if (id.ns() == ns) ids.push_back(id);
      return true;
    });
  }
  v1::VerifyProgress p;
  p.set_total(ids.size());
  for (const EntryKey& id : ids) {
    if (!all || store.Inspect(id).has_done) {
      absl::StatusOr<StoredEntry> found = store.Find(id);
      if (found.ok()) {
        p.set_ok(p.ok() + 1);
        if (absl::Status s = catalog_->Record(id, *found); !s.ok()) return s;
      } else if (absl::IsNotFound(found.status())) {
        p.set_quarantined(p.quarantined() + 1);
        *p.add_damaged() = id.ToProto();
        if (absl::Status s = catalog_->Forget(id); !s.ok()) return s;
      } else {
        return found.status();
      }
    }
    p.set_checked(p.checked() + 1);
    if (p.checked() % kProgressEvery == 0) {
      v1::VerifyProgress partial = p;
      partial.clear_damaged();
      progress(partial);
    }
  }
  p.set_finished(true);
  progress(p);
  return absl::OkStatus();
}

namespace {

// model.done's compile_ms, from this host's index if it has the entry (no
// cost on the store), else from model.done itself (one read).
int64_t CompileMs(Catalog& catalog, Store& store, const EntryKey& id) {
  std::string value;
  absl::StatusOr<std::optional<v1::IndexRecord>> record =
      catalog.index().Get(id);
  if (record.ok() && record->has_value()) {
    auto it = (*record)->entry().metadata().find(kCompileMsMetadata);
    if (it != (*record)->entry().metadata().end()) value = it->second;
  }
  if (value.empty()) {
    absl::StatusOr<std::string> text =
        ReadSmallFile(store.PathsOf(id).done(), 1 << 20);
    absl::StatusOr<v1::DoneRecord> done =
        text.ok() ? ParseDoneRecord(*text) : text.status();
    if (done.ok()) {
      auto it = done->metadata().find(kCompileMsMetadata);
      if (it != done->metadata().end()) value = it->second;
    }
  }
  int64_t ms = -1;
  return absl::SimpleAtoi(value, &ms) && ms >= 0 ? ms : -1;
}

}  // namespace

absl::StatusOr<v1::GcResponse> Maintenance::Gc(Namespace ns,
                                               const v1::GcRequest& request,
                                               const GcScope& scope) {
  Store& store = catalog_->StoreFor(ns);
  v1::GcResponse response;
  // Temp files' and aside items' ages are judged by the store's clock: their
  // mtimes were set by whichever host wrote them.
  const absl::Time store_now =
      store.FilesystemNow().value_or(options_.env->Now());
  v1::Leftovers& removed_leftovers = *response.mutable_leftovers_removed();
  v1::Leftovers& leftovers = *response.mutable_leftovers_after();
  std::vector<GcCandidate> entries;
  absl::Status listed = store.ForEachEntry([&](const EntryKey& id) {
    EntryState state = store.Inspect(id);
    for (const TempFile& temp : state.temp_files) {
      const bool orphaned = store_now - temp.mtime >= options_.temp_grace;
      if (orphaned &&
          (request.dry_run() || store.RemoveTempFile(id, temp.name).ok())) {
        removed_leftovers.set_temp_files(removed_leftovers.temp_files() + 1);
        removed_leftovers.set_temp_bytes(removed_leftovers.temp_bytes() +
                                         temp.size);
      } else {
        leftovers.set_temp_files(leftovers.temp_files() + 1);
        leftovers.set_temp_bytes(leftovers.temp_bytes() + temp.size);
      }
    }
    const bool leased = options_.lease_out(id) || !state.lock_files.empty();
    // An artifact no record describes (an unmodified TorchNeuron rank's put):
    // Find records it, so it is ordered with every other entry.
    if (state.has_artifact && !state.has_done && !leased &&
        !request.dry_run() && store.Find(id).ok()) {
      state.has_done = true;
      state.done_mtime = state.artifact_mtime;
    }
    // Records left without their artifact: TorchNeuron's cache clear (which
    // removes every *.neff) or a removal by hand. They describe nothing;
    // a publish in flight holds a lease, and a failure its model.log.
    if (state.exists && !state.has_artifact && !state.has_log && !leased &&
        state.temp_files.empty()) {
      if (request.dry_run() || store.Remove(id).ok()) {
        removed_leftovers.set_cleared_records(
            removed_leftovers.cleared_records() + 1);
      } else {
        leftovers.set_cleared_records(leftovers.cleared_records() + 1);
      }
      return true;
    }
    if (!state.has_artifact || !state.has_done) return true;
    GcCandidate c{id, state.artifact_size, state.done_mtime,
                  v1::GcRemoval::PUBLISHED, leased};
    auto used = scope.last_uses.find(AccessJournal::KeyOf(id));
    if (used != scope.last_uses.end()) {
      c.last_use = c.journaled = used->second;
      c.source = v1::GcRemoval::JOURNAL;
    }
    const absl::Time here = catalog_->LastServed(id);
    if (here != absl::InfinitePast() &&
        (c.source == v1::GcRemoval::PUBLISHED || here >= c.last_use)) {
      c.last_use = here;
      c.source = v1::GcRemoval::THIS_HOST;
    }
    entries.push_back(std::move(c));
    return true;
  });
  if (!listed.ok()) return listed;
  if (absl::Status s = SweepAside(store, store_now, request.dry_run(),
                                  &removed_leftovers, &leftovers);
      !s.ok()) {
    return s;
  }
  GcGoals goals;
  goals.max_size_bytes = request.max_size_bytes();
  goals.now = options_.env->Now();
  if (request.older_than_seconds() > 0) {
    goals.cutoff = goals.now - absl::Seconds(request.older_than_seconds());
  }
  goals.recent = options_.recent;
  goals.lag = scope.lag;
  goals.grain = scope.grain;
  const GcPlan plan = PlanGc(entries, goals, [&](const EntryKey& id) {
    return CompileMs(*catalog_, store, id);
  });
  response.set_lease_host(scope.lease_host);
  response.set_lease_id(scope.lease_id);
  response.set_journals_read(scope.journals_read);
  response.set_entries_before(entries.size());
  response.set_bytes_before(plan.bytes_before);
  response.set_skipped_locked(plan.skipped_leased);
  response.set_skipped_recent(plan.skipped_recent);
  uint64_t total = plan.bytes_before;
  uint64_t removed = 0;
  for (const GcVictim& victim : plan.victims) {
    const GcCandidate& c = entries[victim.candidate];
    if (!request.dry_run()) {
      if (!scope.still_held()) {
        return absl::AbortedError(absl::StrCat(
            "lost the gc lease ", scope.lease_id, " on ", store.root(),
            " after removing ", removed, " entries; stopped"));
      }
      absl::Status s = store.Remove(c.id);
      if (absl::IsNotFound(s)) continue;  // removed meanwhile
      if (!s.ok()) return s;
      if (absl::Status f = catalog_->Forget(c.id); !f.ok()) return f;
      options_.on_evict(c.id);
    }
    ++removed;
    total -= c.size;
    response.set_removed_bytes(response.removed_bytes() + c.size);
    *response.add_removed() = c.id.ToProto();
    v1::GcRemoval* why = response.add_removals();
    *why->mutable_id() = c.id.ToProto();
    why->set_reason(victim.reason);
    why->set_size(c.size);
    why->set_last_use_unix_ms(absl::ToUnixMillis(c.last_use));
    why->set_last_use_source(c.source);
    why->set_compile_ms(c.compile_ms);
  }
  response.set_removed_entries(removed);
  response.set_entries_after(entries.size() - removed);
  response.set_bytes_after(total);
  return response;
}

absl::Status Maintenance::SweepAside(Store& store, absl::Time now, bool dry_run,
                                     v1::Leftovers* removed,
                                     v1::Leftovers* kept) {
  AsideBounds quarantine = options_.quarantine;
  quarantine.dry_run = dry_run;
  absl::StatusOr<AsideSweep> q =
      store.SweepAside(AsideDir::kQuarantine, quarantine, now);
  if (!q.ok()) return q.status();
  AsideBounds trash = options_.trash;
  trash.dry_run = dry_run;
  absl::StatusOr<AsideSweep> t = store.SweepAside(AsideDir::kTrash, trash, now);
  if (!t.ok()) return t.status();
  removed->set_quarantine_entries(q->removed.items);
  removed->set_quarantine_bytes(q->removed.bytes);
  removed->set_trash_entries(t->removed.items);
  removed->set_trash_bytes(t->removed.bytes);
  kept->set_quarantine_entries(q->kept.items);
  kept->set_quarantine_bytes(q->kept.bytes);
  kept->set_trash_entries(t->kept.items);
  kept->set_trash_bytes(t->kept.bytes);
  return absl::OkStatus();
}

absl::Status Maintenance::Import(
    Namespace ns, bool clear_stale_locks,
    const std::function<void(const v1::ImportProgress&)>& progress) {
  Store& store = catalog_->StoreFor(ns);
  absl::StatusOr<absl::Time> fs_now = store.FilesystemNow();
  if (!fs_now.ok()) return fs_now.status();
  v1::ImportProgress p;
  absl::Status failure;
  // Entries of the layout before TorchNeuron's move in first; the scan
  // below then finds them where they are now.
  absl::Status migrated = store.ForEachOldLayoutEntry([&](const EntryKey& id) {
    absl::StatusOr<Store::Migration> outcome = store.MigrateOldLayoutEntry(id);
    if (!outcome.ok()) {
      failure = outcome.status();
      return false;
    }
    if (*outcome == Store::Migration::kMoved) p.set_migrated(p.migrated() + 1);
    if (*outcome == Store::Migration::kDamaged) p.set_corrupt(p.corrupt() + 1);
    if (*outcome == Store::Migration::kLocked) p.set_locked(p.locked() + 1);
    return true;
  });
  if (!failure.ok()) return failure;
  if (!migrated.ok()) return migrated;
  absl::Status listed = store.ForEachEntry([&](const EntryKey& id) {
    p.set_scanned(p.scanned() + 1);
    EntryState state = store.Inspect(id);
    if (!state.lock_files.empty()) p.set_locked(p.locked() + 1);
    for (const auto& [name, mtime] : state.lock_files) {
      if (*fs_now - mtime <= options_.stale_lock_age) continue;
      p.set_stale_locks(p.stale_locks() + 1);
      if (clear_stale_locks && store.RemoveLockFile(id, name).ok()) {
        p.set_cleared_locks(p.cleared_locks() + 1);
      }
    }
    // An artifact no record describes (an unmodified rank's) is adopted.
    const bool adopt =
        state.has_artifact && !state.has_done && state.lock_files.empty();
    if (state.has_artifact && (state.has_done || adopt)) {
      // Find verifies, records unrecorded artifacts, quarantines damage.
      absl::StatusOr<StoredEntry> found = store.Find(id);
      if (found.ok()) {
        p.set_done(p.done() + 1);
        if (adopt) p.set_legacy(p.legacy() + 1);
        failure = catalog_->Record(id, *found);
      } else if (absl::IsNotFound(found.status())) {
        p.set_corrupt(p.corrupt() + 1);
      } else {
        failure = found.status();
      }
    } else if (state.has_log) {
      p.set_failed(p.failed() + 1);
    } else if (state.has_artifact && state.lock_files.empty()) {
      p.set_corrupt(p.corrupt() + 1);  // an artifact Find could not open
    }
    if (p.scanned() % kProgressEvery == 0) progress(p);
    return failure.ok();
  });
  if (!failure.ok()) return failure;
  if (!listed.ok()) return listed;
  p.set_finished(true);
  progress(p);
  return absl::OkStatus();
}

}  // namespace neffd
