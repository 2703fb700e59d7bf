// neffctl's operator commands: stats, evict, verify, gc, import.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/neffctl/ctl.h"

namespace neffd::ctl {

int Ctl::Stats() {
  v1::Stats stats;
  grpc::Status status = cache_->GetStats(Context(absl::Seconds(10)).get(),
                                         v1::GetStatsRequest(), &stats);
  if (!status.ok()) return RpcFailure(status, address_);
  if (json_) {
    PrintJson(stats);
    return kOk;
  }
  const double hit_rate =
      stats.lookups() ? 100.0 * stats.hits() / stats.lookups() : 0.0;
  std::printf(
      "lookups           %llu\n"
      "hits              %llu (%.1f%%)\n"
      "misses            %llu\n"
      "publishes         %llu\n"
      "already cached    %llu\n"
      "lock grants       %llu\n"
      "lock waits        %llu\n"
      "leases held       %llu\n"
      "entries           %llu\n"
      "bytes             %llu\n",
      (unsigned long long)stats.lookups(), (unsigned long long)stats.hits(),
      hit_rate, (unsigned long long)stats.misses(),
      (unsigned long long)stats.publishes(),
      (unsigned long long)stats.already_cached(),
      (unsigned long long)stats.lock_grants(),
      (unsigned long long)stats.lock_waits(),
      (unsigned long long)stats.leases_held(),
      (unsigned long long)stats.entries(), (unsigned long long)stats.bytes());
  return kOk;
}

int Ctl::Evict(const EntryKey& id) {
  v1::EvictRequest request;
  *request.mutable_id() = id.ToProto();
  v1::EvictResponse response;
  grpc::Status status =
      admin_->Evict(Context(absl::Minutes(5)).get(), request, &response);
  if (!status.ok()) return RpcFailure(status, address_);
  const bool removed = response.removed_entry() || response.removed_failure();
  if (json_) {
    PrintJson(response);
  } else if (removed) {
    std::printf(
        "evicted %s%s\n", id.Canonical().c_str(),
        response.removed_failure() ? " (and its recorded failure)" : "");
  } else {
    std::printf("no entry %s\n", id.Canonical().c_str());
  }
  return removed ? kOk : kMiss;
}

int Ctl::Verify(const std::string& ns, bool all) {
  v1::VerifyRequest request;
  request.set_namespace_(ns);
  request.set_all(all);
  auto context = Context(absl::Hours(24));
  auto reader = admin_->Verify(context.get(), request);
  v1::VerifyProgress progress, last;
  {
    Progress bar("verify");
    while (reader->Read(&progress)) {
      last = progress;
      bar.Update(progress.checked(), progress.total(),
                 absl::StrFormat("ok %d quarantined %d", progress.ok(),
                                 progress.quarantined()));
    }
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return RpcFailure(status, address_);
  if (json_) {
    PrintJson(last);
  } else {
    std::printf("verified %llu entries: %llu ok, %llu quarantined\n",
                (unsigned long long)last.checked(),
                (unsigned long long)last.ok(),
                (unsigned long long)last.quarantined());
    for (const v1::EntryId& id : last.damaged()) {
      std::printf("  quarantined %s/%s/%s\n", id.namespace_().c_str(),
                  id.compiler_version().c_str(), id.key().c_str());
    }
  }
  return kOk;
}

int Ctl::Gc(const std::string& ns, uint64_t max_size, absl::Duration older_than,
            bool dry_run) {
  v1::GcRequest request;
  request.set_namespace_(ns);
  request.set_max_size_bytes(max_size);
  request.set_older_than_seconds(absl::ToInt64Seconds(older_than));
  request.set_dry_run(dry_run);
  v1::GcResponse response;
  grpc::Status status =
      admin_->Gc(Context(absl::Hours(24)).get(), request, &response);
  if (!status.ok()) return RpcFailure(status, address_);
  if (json_) {
    PrintJson(response);
    return kOk;
  }
  std::printf(
      "%s %llu of %llu entries (%s); store %s -> %s\n"
      "skipped: %llu being compiled, %llu served in the last minute\n",
      dry_run ? "would remove" : "removed",
      (unsigned long long)response.removed_entries(),
      (unsigned long long)response.entries_before(),
      HumanBytes(response.removed_bytes()).c_str(),
      HumanBytes(response.bytes_before()).c_str(),
      HumanBytes(response.bytes_after()).c_str(),
      (unsigned long long)response.skipped_locked(),
      (unsigned long long)response.skipped_recent());
  return kOk;
}

int Ctl::Import(const std::string& dir, bool clear_stale_locks) {
  v1::ImportRequest request;
  request.set_dir(dir);
  request.set_clear_stale_locks(clear_stale_locks);
  auto context = Context(absl::Hours(24));
  auto reader = admin_->Import(context.get(), request);
  v1::ImportProgress progress, last;
  {
    Progress bar("import");
    while (reader->Read(&progress)) {
      last = progress;
      bar.Update(progress.scanned(), progress.scanned(),
                 absl::StrFormat("done %d failed %d locked %d corrupt %d",
                                 progress.done(), progress.failed(),
                                 progress.locked(), progress.corrupt()));
    }
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return RpcFailure(status, address_);
  if (json_) {
    PrintJson(last);
    return kOk;
  }
  std::printf(
      "scanned %llu entries: %llu done (%llu legacy), %llu failed, "
      "%llu locked (%llu stale locks, %llu cleared), %llu corrupt\n",
      (unsigned long long)last.scanned(), (unsigned long long)last.done(),
      (unsigned long long)last.legacy(), (unsigned long long)last.failed(),
      (unsigned long long)last.locked(), (unsigned long long)last.stale_locks(),
      (unsigned long long)last.cleared_locks(),
      (unsigned long long)last.corrupt());
  return kOk;
}

}  // namespace neffd::ctl
