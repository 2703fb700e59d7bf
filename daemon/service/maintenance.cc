#include "daemon/service/maintenance.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"

namespace neffd {
namespace {

constexpr uint64_t kProgressEvery = 256;

}  // namespace

Maintenance::Maintenance(MaintenanceOptions options, Catalog* catalog)
    : options_(std::move(options)), catalog_(catalog) {}

absl::StatusOr<v1::EvictResponse> Maintenance::Evict(const EntryKey& id) {
  Store& store = catalog_->StoreFor(id);
  EntryState state = store.Inspect(id);
  if (options_.lease_out(id) || !state.lock_files.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("id: ", id.Canonical(),
                     " is being compiled (a lease is out); evict it later"));
  }
  v1::EvictResponse response;
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

absl::StatusOr<v1::GcResponse> Maintenance::Gc(Namespace ns,
                                               const v1::GcRequest& request) {
  struct Candidate {
    EntryKey id;
    uint64_t size;
    absl::Time last_access;
    bool locked;
  };
  Store& store = catalog_->StoreFor(ns);
  std::vector<Candidate> entries;
  absl::Status listed = store.ForEachEntry([&](const EntryKey& id) {
    EntryState state = store.Inspect(id);
    if (!state.has_artifact || !state.has_done) return true;
    absl::Time last = catalog_->LastServed(id);
    if (last == absl::InfinitePast()) last = state.done_mtime;
    entries.push_back(
        Candidate{id, state.artifact_size, last,
                  options_.lease_out(id) || !state.lock_files.empty()});
    return true;
  });
  if (!listed.ok()) return listed;
  std::sort(entries.begin(), entries.end(),
            [](const Candidate& a, const Candidate& b) {
              return a.last_access < b.last_access;
            });
  v1::GcResponse response;
  uint64_t total = 0;
  for (const Candidate& c : entries) total += c.size;
  response.set_entries_before(entries.size());
  response.set_bytes_before(total);
  const absl::Time now = options_.now();
  const absl::Time cutoff =
      request.older_than_seconds() > 0
          ? now - absl::Seconds(request.older_than_seconds())
          : absl::InfinitePast();
  uint64_t removed = 0;
  for (const Candidate& c : entries) {
    const bool over_size =
        request.max_size_bytes() > 0 && total > request.max_size_bytes();
    if (!over_size && !(c.last_access < cutoff)) break;  // LRU order
    if (c.locked) {
      response.set_skipped_locked(response.skipped_locked() + 1);
      continue;
    }
    if (now - c.last_access < options_.recent) {
      response.set_skipped_recent(response.skipped_recent() + 1);
      continue;
    }
    if (!request.dry_run()) {
      absl::Status s = store.Remove(c.id);
      if (absl::IsNotFound(s)) continue;  // removed meanwhile
      if (!s.ok()) return s;
      if (absl::Status f = catalog_->Forget(c.id); !f.ok()) return f;
    }
    ++removed;
    total -= c.size;
    response.set_removed_bytes(response.removed_bytes() + c.size);
    *response.add_removed() = c.id.ToProto();
  }
  response.set_removed_entries(removed);
  response.set_entries_after(entries.size() - removed);
  response.set_bytes_after(total);
  return response;
}

absl::Status Maintenance::Import(
    Namespace ns, bool clear_stale_locks,
    const std::function<void(const v1::ImportProgress&)>& progress) {
  Store& store = catalog_->StoreFor(ns);
  absl::StatusOr<absl::Time> fs_now = store.FilesystemNow();
  if (!fs_now.ok()) return fs_now.status();
  v1::ImportProgress p;
  absl::Status failure;
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
    const bool legacy =
        state.has_artifact && !state.has_done && state.legacy_inputs;
    if (state.has_done || legacy) {
      // Find verifies, adopts legacy entries and quarantines damage.
      absl::StatusOr<StoredEntry> found = store.Find(id);
      if (found.ok()) {
        p.set_done(p.done() + 1);
        if (legacy) p.set_legacy(p.legacy() + 1);
        failure = catalog_->Record(id, *found);
      } else if (absl::IsNotFound(found.status())) {
        p.set_corrupt(p.corrupt() + 1);
      } else {
        failure = found.status();
      }
    } else if (state.has_log) {
      p.set_failed(p.failed() + 1);
    } else if (state.lock_files.empty()) {
      // An artifact or inputs without a marker or a lock: an abandoned
      // compile. Reported; an old orphan artifact is quarantined by Find.
      if (state.has_artifact) (void)store.Find(id);
      p.set_corrupt(p.corrupt() + 1);
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
