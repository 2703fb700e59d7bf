// neffctl's operator commands: stats (and -z; its table: stats_table.cc),
// evict, verify, gc, import.
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/cache_client.h"
#include "client/neffcc/import.h"
#include "client/neffctl/ctl.h"
#include "google/protobuf/struct.pb.h"

namespace neffd::ctl {

int Ctl::Stats() {
  v1::Stats stats;
  grpc::Status status = cache_->GetStats(Context(absl::Seconds(10)).get(),
                                         v1::GetStatsRequest(), &stats);
  if (!status.ok()) return RpcFailure(status, address_);
  if (json_) {
    PrintJson(stats);
  } else {
    PrintStats(stats, address_);
  }
  return kOk;
}

int Ctl::ResetStats() {
  v1::Stats stats;
  grpc::Status status = operator_->ResetStats(Context(absl::Seconds(10)).get(),
                                              v1::ResetStatsRequest(), &stats);
  if (!status.ok()) return RpcFailure(status, admin_address_);
  if (json_) {
    PrintJson(stats);
  } else {
    PrintStats(stats, address_);
    std::printf("Statistics zeroed.\n");
  }
  return kOk;
}

int Ctl::Evict(const EntryKey& id, bool failure_only) {
  v1::EvictRequest request;
  *request.mutable_id() = id.ToProto();
  request.set_failure_only(failure_only);
  v1::EvictResponse response;
  grpc::Status status =
      operator_->Evict(Context(absl::Minutes(5)).get(), request, &response);
  if (!status.ok()) return RpcFailure(status, admin_address_);
  const bool removed = response.removed_entry() || response.removed_failure();
  if (json_) {
    PrintJson(response);
  } else if (failure_only) {
    std::printf(removed ? "forgot the recorded failure of %s\n"
                        : "no recorded failure %s\n",
                id.Canonical().c_str());
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
      operator_->Gc(Context(absl::Hours(24)).get(), request, &response);
  if (!status.ok()) return RpcFailure(status, admin_address_);
  if (json_) {
    PrintJson(response);
    return kOk;
  }
  std::printf(
      "%s %llu of %llu entries (%s); store %s -> %s\n"
      "skipped: %llu being compiled, %llu served recently on some host\n",
      dry_run ? "would remove" : "removed",
      (unsigned long long)response.removed_entries(),
      (unsigned long long)response.entries_before(),
      HumanBytes(response.removed_bytes()).c_str(),
      HumanBytes(response.bytes_before()).c_str(),
      HumanBytes(response.bytes_after()).c_str(),
      (unsigned long long)response.skipped_locked(),
      (unsigned long long)response.skipped_recent());
  const v1::Leftovers& gone = response.leftovers_removed();
  const v1::Leftovers& left = response.leftovers_after();
  std::printf(
      "leftovers %s: %llu temp files (%s), %llu quarantined (%s), %llu in "
      "trash (%s), %llu cleared records; left: %llu temp files, %llu "
      "quarantined (%s), %llu in trash\n",
      dry_run ? "to remove" : "removed", (unsigned long long)gone.temp_files(),
      HumanBytes(gone.temp_bytes()).c_str(),
      (unsigned long long)gone.quarantine_entries(),
      HumanBytes(gone.quarantine_bytes()).c_str(),
      (unsigned long long)gone.trash_entries(),
      HumanBytes(gone.trash_bytes()).c_str(),
      (unsigned long long)gone.cleared_records(),
      (unsigned long long)left.temp_files(),
      (unsigned long long)left.quarantine_entries(),
      HumanBytes(left.quarantine_bytes()).c_str(),
      (unsigned long long)left.trash_entries());
  if (!response.lease_id().empty()) {
    std::printf("ran under gc lease %s of host %s; %llu hosts' journals read\n",
                response.lease_id().c_str(), response.lease_host().c_str(),
                (unsigned long long)response.journals_read());
  }
  if (response.lock_files_removed() > 0) {
    std::printf(
        "%llu lock files nobody held removed from this host's lock "
        "directory\n",
        (unsigned long long)response.lock_files_removed());
  }
  // Why each entry went: coldness on every host, then compile cost.
  for (const v1::GcRemoval& why : response.removals()) {
    const char* source =
        why.last_use_source() == v1::GcRemoval::JOURNAL     ? "a host's journal"
        : why.last_use_source() == v1::GcRemoval::THIS_HOST ? "this host"
                                                            : "never served";
    std::printf(
        "  %s/%s %s: %s; last used %s (%s); compile %s\n",
        why.id().compiler_version().c_str(), why.id().key().c_str(),
        HumanBytes(why.size()).c_str(),
        why.reason() == v1::GcRemoval::OVER_SIZE ? "over the size goal"
                                                 : "older than the age goal",
        absl::FormatTime("%Y-%m-%dT%H:%M:%SZ",
                         absl::FromUnixMillis(why.last_use_unix_ms()),
                         absl::UTCTimeZone())
            .c_str(),
        source,
        why.compile_ms() < 0 ? "time unknown"
                             : absl::StrCat(why.compile_ms(), " ms").c_str());
  }
  return kOk;
}

int Ctl::Import(const std::string& dir, bool clear_stale_locks) {
  v1::ImportRequest request;
  request.set_dir(dir);
  request.set_clear_stale_locks(clear_stale_locks);
  auto context = Context(absl::Hours(24));
  auto reader = operator_->Import(context.get(), request);
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
  // Not the daemon's store: a libneuronxla cache is filed under neffcc's keys.
  if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
      neffcc::LooksLikeLibneuronxlaCache(dir)) {
    return ImportLibneuronxla(dir);
  }
  if (!status.ok()) return RpcFailure(status, admin_address_);
  if (json_) {
    PrintJson(last);
    return kOk;
  }
  if (last.migrated() > 0) {
    std::printf("moved %llu entries from the layout before TorchNeuron's\n",
                (unsigned long long)last.migrated());
  }
  std::printf(
      "scanned %llu entries: %llu done (%llu adopted), %llu failed, "
      "%llu locked (%llu stale locks, %llu cleared), %llu corrupt\n",
      (unsigned long long)last.scanned(), (unsigned long long)last.done(),
      (unsigned long long)last.legacy(), (unsigned long long)last.failed(),
      (unsigned long long)last.locked(), (unsigned long long)last.stale_locks(),
      (unsigned long long)last.cleared_locks(),
      (unsigned long long)last.corrupt());
  return kOk;
}

int Ctl::ImportLibneuronxla(const std::string& dir) {
  std::unique_ptr<CacheClient> client = CacheClient::FromEnvironment(address_);
  absl::StatusOr<neffcc::LibneuronxlaImport> done =
      neffcc::ImportLibneuronxlaCache(*client, dir);
  if (!done.ok()) {
    std::fprintf(stderr, "neffctl: importing %s: %s\n", dir.c_str(),
                 std::string(done.status().message()).c_str());
    return kFailed;
  }
  for (const std::string& skipped : done->skipped) {
    std::fprintf(stderr, "neffctl: skipped %s\n", skipped.c_str());
  }
  if (json_) {
    google::protobuf::Struct out;
    auto& fields = *out.mutable_fields();
    fields["libneuronxla_dir"].set_string_value(dir);
    fields["scanned"].set_number_value(done->scanned);
    fields["imported"].set_number_value(done->imported);
    fields["cached"].set_number_value(done->cached);
    fields["failed"].set_number_value(done->failed);
    fields["incomplete"].set_number_value(done->incomplete);
    PrintJson(out);
    return kOk;
  }
  std::printf(
      "libneuronxla cache %s: scanned %llu entries: %llu imported, %llu "
      "cached already, %llu failed and %llu incomplete (skipped)\n",
      dir.c_str(), (unsigned long long)done->scanned,
      (unsigned long long)done->imported, (unsigned long long)done->cached,
      (unsigned long long)done->failed, (unsigned long long)done->incomplete);
  return kOk;
}

}  // namespace neffd::ctl
