// CacheAdminService's queries and switches: ListEntries, ShowEntry, GetLocks,
// Drain, Undrain, GetConfig, ResetStats.
#include <unistd.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/locks/lock_files.h"
#include "daemon/log/log.h"
#include "daemon/server/admin_service.h"
#include "daemon/server/grpc_status.h"

namespace neffd {
namespace {

v1::LeaseInfo ToLeaseInfo(const LockTable::LeaseView& view, absl::Time now) {
  v1::LeaseInfo info;
  *info.mutable_id() = view.id.ToProto();
  info.mutable_holder()->set_host(view.holder.host);
  info.mutable_holder()->set_pid(view.holder.pid);
  info.mutable_holder()->set_rank(view.holder.rank);
  info.set_age_ms(absl::ToInt64Milliseconds(now - view.granted));
  info.set_expires_in_ms(absl::ToInt64Milliseconds(view.expires - now));
  info.set_waiters(static_cast<uint32_t>(view.waiters));
  info.set_publishing(view.publishing);
  return info;
}

void SortAndLimit(v1::ListEntriesRequest::SortBy sort_by, uint32_t limit,
                  v1::ListEntriesResponse* response) {
  auto* entries = response->mutable_entries();
  std::stable_sort(
      entries->begin(), entries->end(),
      [sort_by](const v1::EntryInfo& a, const v1::EntryInfo& b) {
        switch (sort_by) {
          case v1::ListEntriesRequest::SIZE:
            return a.entry().size() > b.entry().size();
          case v1::ListEntriesRequest::LAST_ACCESS:
            return a.last_access_unix_ms() > b.last_access_unix_ms();
          default:
            return std::tie(a.id().namespace_(), a.id().compiler_version(),
                            a.id().key()) < std::tie(b.id().namespace_(),
                                                     b.id().compiler_version(),
                                                     b.id().key());
        }
      });
  response->set_total(entries->size());
  if (limit > 0 && static_cast<uint32_t>(entries->size()) > limit) {
    entries->DeleteSubrange(limit, entries->size() - limit);
  }
}

// Entries in the index matching the filters, from the kept totals.
uint64_t MatchingTotal(const Index& index, std::optional<Namespace> only,
                       const std::string& version) {
  uint64_t total = 0;
  for (const Index::VersionTotals& v : index.version_totals()) {
    if ((!only.has_value() || v.ns == *only) &&
        (version.empty() || v.compiler_version == version)) {
      total += v.totals.entries;
    }
  }
  return total;
}

}  // namespace

std::map<std::string, v1::LeaseInfo> CacheAdminService::LeasesByKey() const {
  std::map<std::string, v1::LeaseInfo> out;
  const absl::Time now = options_.env->Now();
  for (const LockTable::LeaseView& view : options_.locks->Leases()) {
    out[view.id.Canonical()] = ToLeaseInfo(view, now);
  }
  return out;
}

void CacheAdminService::AddIndexed(const EntryKey& id,
                                   const v1::IndexRecord& record,
                                   v1::EntryInfo* info) const {
  info->set_cached(true);
  *info->mutable_entry() = record.entry();
  const absl::Time served = catalog_->LastServed(id, record);
  info->set_last_access_unix_ms(
      served == absl::InfinitePast() ? 0 : absl::ToUnixMillis(served));
}

grpc::Status CacheAdminService::ListEntries(
    grpc::ServerContext*, const v1::ListEntriesRequest* request,
    v1::ListEntriesResponse* response) {
  std::optional<Namespace> only;
  if (!request->namespace_().empty()) {
    absl::StatusOr<Namespace> ns =
        ParseNamespaceField("namespace", request->namespace_());
    if (!ns.ok()) return ToGrpcStatus(ns.status());
    only = *ns;
  }
  const std::string& version = request->compiler_version();
  if (!version.empty()) {
    if (absl::Status s = ValidateToken("compiler_version", version); !s.ok()) {
      return ToGrpcStatus(s);
    }
  }
  const std::map<std::string, v1::LeaseInfo> leases = LeasesByKey();
  auto wanted = [&](const EntryKey& id) {
    return (!only.has_value() || id.ns() == *only) &&
           (version.empty() || id.compiler_version() == version) &&
           (!request->locked() || leases.count(id.Canonical()) > 0);
  };
  auto add = [&](const EntryKey& id) -> v1::EntryInfo* {
    v1::EntryInfo* info = response->add_entries();
    *info->mutable_id() = id.ToProto();
    auto lease = leases.find(id.Canonical());
    if (lease != leases.end()) {
      info->set_locked(true);
      *info->mutable_lease() = lease->second;
    }
    return info;
  };
  if (request->failed()) {
    for (Namespace ns : {Namespace::kNeff, Namespace::kHlo}) {
      if (only.has_value() && ns != *only) continue;
      const Store& store = catalog_->StoreFor(ns);
      absl::Status listed = store.ForEachEntry([&](const EntryKey& id) {
        if (!wanted(id)) return true;
        if (std::optional<v1::Failure> failure = store.FindFailure(id)) {
          *add(id)->mutable_failure() = *std::move(failure);
        }
        return true;
      });
      if (!listed.ok()) return ToGrpcStatus(listed);
    }
  } else if (request->locked()) {
    // Keys being compiled here need not be in the index yet.
    for (const auto& [canonical, lease] : leases) {
      absl::StatusOr<EntryKey> id = EntryKey::Parse(lease.id());
      if (!id.ok() || !wanted(*id)) continue;
      v1::EntryInfo* info = add(*id);
      absl::StatusOr<std::optional<v1::IndexRecord>> record =
          catalog_->index().Get(*id);
      if (record.ok() && record->has_value()) {
        info->set_cached(true);
        *info->mutable_entry() = (*record)->entry();
      }
    }
  } else if (request->page_size() > 0 &&
             request->sort_by() == v1::ListEntriesRequest::KEY) {
    // One page in index order, resumed where the last ended: a million
    // entries never sit in one message or in the daemon's memory at once.
    std::string after = request->page_token();
    if (!after.empty()) {
      if (absl::Status s = EntryKey::FromCanonical(after).status(); !s.ok()) {
        return ToGrpcStatus(absl::InvalidArgumentError(
            absl::StrCat("page_token: ", s.message())));
      }
    }
    // Filters are key prefixes: start at the first candidate, stop after
    // the last.
    std::string prefix;
    if (only.has_value()) {
      prefix = absl::StrCat(NamespaceName(*only), "/");
      if (!version.empty()) absl::StrAppend(&prefix, version, "/");
    }
    if (after < prefix) after = prefix;
    uint32_t want = request->page_size();
    if (request->limit() > 0) want = std::min(want, request->limit());
    std::string last;
    catalog_->index().ForEachAfter(
        after, [&](const EntryKey& id, const v1::IndexRecord& record) {
          std::string canonical = id.Canonical();
          if (!absl::StartsWith(canonical, prefix)) return false;
          if (!wanted(id)) return true;
          AddIndexed(id, record, add(id));
          if (static_cast<uint32_t>(response->entries_size()) < want) {
            return true;
          }
          last = std::move(canonical);
          return false;
        });
    response->set_next_page_token(last);
    response->set_total(MatchingTotal(catalog_->index(), only, version));
    return grpc::Status::OK;
  } else {
    catalog_->index().ForEach(
        [&](const EntryKey& id, const v1::IndexRecord& record) {
          if (!wanted(id)) return true;
          AddIndexed(id, record, add(id));
          return true;
        });
  }
  SortAndLimit(request->sort_by(), request->limit(), response);
  return grpc::Status::OK;
}

grpc::Status CacheAdminService::ShowEntry(grpc::ServerContext*,
                                          const v1::ShowEntryRequest* request,
                                          v1::EntryInfo* response) {
  absl::StatusOr<EntryKey> id = EntryKey::Parse(request->id());
  if (!id.ok()) return ToGrpcStatus(id.status());
  *response->mutable_id() = id->ToProto();
  absl::StatusOr<std::optional<v1::Entry>> entry = catalog_->Find(*id);
  if (!entry.ok()) return ToGrpcStatus(entry.status());
  if (entry->has_value()) {
    response->set_cached(true);
    *response->mutable_entry() = **entry;
    const absl::Time served = catalog_->LastServed(*id);
    if (served != absl::InfinitePast()) {
      response->set_last_access_unix_ms(absl::ToUnixMillis(served));
    }
  } else if (std::optional<v1::Failure> failure =
                 catalog_->StoreFor(*id).FindFailure(*id)) {
    *response->mutable_failure() = *std::move(failure);
  }
  const std::map<std::string, v1::LeaseInfo> leases = LeasesByKey();
  auto lease = leases.find(id->Canonical());
  if (lease != leases.end()) {
    response->set_locked(true);
    *response->mutable_lease() = lease->second;
  }
  if (!response->cached() && !response->has_failure() && !response->locked()) {
    return grpc::Status(grpc::StatusCode::NOT_FOUND,
                        absl::StrCat("no entry ", id->Canonical()));
  }
  return grpc::Status::OK;
}

grpc::Status CacheAdminService::GetLocks(grpc::ServerContext*,
                                         const v1::GetLocksRequest*,
                                         v1::LocksResponse* response) {
  // The total first, the leases after: a waiter leaves only when its lease
  // ends or its wait times out, so one the total counts is still on its lease
  // when the leases are read (the other order could miss a new waiter).
  response->set_waiters(options_.locks->counts().waiters);
  for (auto& [key, info] : LeasesByKey()) *response->add_leases() = info;
  response->set_draining(options_.locks->draining());
  if (options_.cluster_holders) options_.cluster_holders(response);
  if (!options_.locks_dir.empty()) {
    // /proc/locks unreadable (an unusual sandbox): the leases still answer.
    absl::StatusOr<std::vector<HeldLockFile>> held =
        HeldLockFiles(options_.locks_dir, options_.env, getpid());
    for (const HeldLockFile& f : held.value_or(std::vector<HeldLockFile>())) {
      v1::FileLockInfo* info = response->add_file_locks();
      info->set_key(f.key);
      info->set_pid(f.pid);
      info->set_path(f.path);
    }
  }
  return grpc::Status::OK;
}

grpc::Status CacheAdminService::SetDraining(const grpc::ServerContext* context,
                                            bool draining,
                                            v1::DrainResponse* response) {
  if (grpc::Status s =
          CheckMutationAllowed(context, draining ? "Drain" : "Undrain");
      !s.ok()) {
    return s;
  }
  options_.set_draining(draining);
  const LockTable::Counts counts = options_.locks->counts();
  response->set_draining(options_.locks->draining());
  response->set_leases_held(counts.leases_held);
  response->set_waiters(counts.waiters);
  log::Warning(draining ? "drain" : "undrain",
               {{"leases_held", counts.leases_held}});
  return grpc::Status::OK;
}

grpc::Status CacheAdminService::Drain(grpc::ServerContext* context,
                                      const v1::DrainRequest*,
                                      v1::DrainResponse* response) {
  return SetDraining(context, true, response);
}

grpc::Status CacheAdminService::Undrain(grpc::ServerContext* context,
                                        const v1::DrainRequest*,
                                        v1::DrainResponse* response) {
  return SetDraining(context, false, response);
}

grpc::Status CacheAdminService::GetConfig(grpc::ServerContext*,
                                          const v1::GetConfigRequest*,
                                          v1::ConfigResponse* response) {
  *response = options_.config;
  return grpc::Status::OK;
}

grpc::Status CacheAdminService::ResetStats(grpc::ServerContext* context,
                                           const v1::ResetStatsRequest*,
                                           v1::Stats* response) {
  if (grpc::Status s = CheckMutationAllowed(context, "ResetStats"); !s.ok())
    return s;
  const v1::Stats cumulative = options_.cumulative_stats();
  *response = options_.telemetry->SinceReset(cumulative);
  options_.telemetry->Reset(cumulative);
  log::Info("stats_reset");
  return grpc::Status::OK;
}

}  // namespace neffd
