#include "daemon/server/compile_cache_service.h"

#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "daemon/log/log.h"
#include "daemon/server/grpc_status.h"
#include "daemon/server/request_validation.h"

namespace neffd {
namespace {

grpc::Status Invalid(absl::string_view message) {
  return MakeGrpcStatus(grpc::StatusCode::INVALID_ARGUMENT, message);
}

}  // namespace

// A Lock call in flight. Owns nothing but its waiter registration; deletes
// itself in OnDone.
class CompileCacheService::LockReactor : public grpc::ServerUnaryReactor {
 public:
  explicit LockReactor(LockTable* locks) : locks_(locks) {}

  void set_waiter(LockTable::WaiterId id) { waiter_.store(id); }

  void OnCancel() override {
    // Only a waiter still parked is ours to answer; otherwise its callback
    // has finished (or is finishing) the call.
    LockTable::WaiterId id = waiter_.load();
    if (id != 0 && locks_->Cancel(id)) {
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "lock wait cancelled"));
    }
  }
  void OnDone() override { delete this; }

 private:
  LockTable* const locks_;
  std::atomic<LockTable::WaiterId> waiter_{0};
};

CompileCacheService::CompileCacheService(ServiceOptions options,
                                         Catalog* catalog, LockTable* locks,
                                         LocalTier* tier, Publisher* publisher,
                                         Telemetry* telemetry)
    : options_(std::move(options)),
      catalog_(catalog),
      locks_(locks),
      tier_(tier),
      publisher_(publisher),
      telemetry_(telemetry),
      started_(options_.env->Now()) {}

absl::StatusOr<std::optional<v1::Entry>> CompileCacheService::Serve(
    const EntryKey& id) {
  absl::StatusOr<std::optional<v1::Entry>> found = catalog_->Find(id);
  if (!found.ok() || !found->has_value() || !TierServes(tier_, id)) {
    if (found.ok() && found->has_value()) telemetry_->CountHitTier(false);
    return found;
  }
  bool from_shared = false;
  absl::StatusOr<v1::Entry> local = tier_->Get(id, **found, &from_shared);
  if (local.ok()) {
    telemetry_->CountHitTier(!from_shared);
    return *local;
  }
  telemetry_->CountHitTier(false);
  if (!absl::IsDataLoss(local.status())) return found;  // local disk trouble
  // The shared copy changed after it was verified: check it from scratch
  // (the store quarantines it) rather than serve it.
  if (absl::Status s = catalog_->Forget(id); !s.ok()) return s;
  found = catalog_->Find(id);
  if (!found.ok() || !found->has_value()) return found;
  return ServeLocally(tier_, id, **found);
}

grpc::ServerUnaryReactor* CompileCacheService::Lookup(
    grpc::CallbackServerContext* context, const v1::LookupRequest* request,
    v1::LookupResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(AnswerLookup(*request, response));
  return reactor;
}

grpc::Status CompileCacheService::AnswerLookup(const v1::LookupRequest& request,
                                               v1::LookupResponse* response) {
  absl::StatusOr<EntryKey> id = EntryKey::Parse(request.id());
  if (!id.ok()) return ToGrpcStatus(id.status());
  if (locks_->Held(*id)) {  // being compiled on this host: a miss for now
    telemetry_->CountLookup(id->ns(), LookupResult::kMiss);
    response->set_result(v1::LookupResponse::MISS);
    return grpc::Status::OK;
  }
  absl::StatusOr<std::optional<v1::Entry>> entry = Serve(*id);
  if (!entry.ok()) return ToGrpcStatus(entry.status());
  if (entry->has_value()) {
    telemetry_->CountLookup(id->ns(), LookupResult::kHit);
    response->set_result(v1::LookupResponse::HIT);
    *response->mutable_entry() = *std::move(*entry);
    return grpc::Status::OK;
  }
  if (std::optional<v1::Failure> failure = StoreFor(*id).FindFailure(*id)) {
    telemetry_->CountLookup(id->ns(), LookupResult::kFailed);
    response->set_result(v1::LookupResponse::FAILED);
    *response->mutable_failure() = *std::move(failure);
    return grpc::Status::OK;
  }
  telemetry_->CountLookup(id->ns(), LookupResult::kMiss);
  response->set_result(v1::LookupResponse::MISS);
  return grpc::Status::OK;
}

absl::StatusOr<bool> CompileCacheService::AnswerWithoutLock(
    const EntryKey& id, v1::LockResponse* response) {
  absl::StatusOr<std::optional<v1::Entry>> entry = Serve(id);
  if (!entry.ok()) return entry.status();
  if (entry->has_value()) {
    response->set_outcome(v1::LockResponse::READY);
    *response->mutable_entry() = **entry;
    return true;
  }
  if (std::optional<v1::Failure> failure = StoreFor(id).FindFailure(id)) {
    response->set_outcome(v1::LockResponse::FAILED);
    *response->mutable_failure() = *std::move(failure);
    return true;
  }
  return false;
}

grpc::ServerUnaryReactor* CompileCacheService::Lock(
    grpc::CallbackServerContext* context, const v1::LockRequest* request,
    v1::LockResponse* response) {
  auto* reactor = new LockReactor(locks_);
  absl::StatusOr<EntryKey> id = ValidateLockRequest(*request, limits());
  if (!id.ok()) {
    reactor->Finish(ToGrpcStatus(id.status()));
    return reactor;
  }
  const absl::Time started = options_.env->Now();
  // Compiling on this host right now: the entry cannot be complete yet, and
  // the waiter will hear when it is, so the shared store need not be asked.
  // (After a grant it must be: the entry may have appeared meanwhile.)
  absl::StatusOr<bool> answered =
      locks_->Held(*id) ? false : AnswerWithoutLock(*id, response);
  if (!answered.ok() || *answered) {
    response->set_at_once(answered.ok());
    if (answered.ok() && request->look_up()) {
      // What the caller's Lookup would have answered; no lock was asked.
      telemetry_->CountLookup(id->ns(),
                              response->outcome() == v1::LockResponse::READY
                                  ? LookupResult::kHit
                                  : LookupResult::kFailed);
    } else if (answered.ok()) {
      CountLock(*response, grpc::Status::OK, started);
    }
    reactor->Finish(ToGrpcStatus(answered.status()));
    return reactor;
  }
  if (request->look_up())
    telemetry_->CountLookup(id->ns(), LookupResult::kMiss);
  const absl::Duration wait = request->wait_seconds() > 0
                                  ? absl::Seconds(request->wait_seconds())
                                  : options_.default_lock_timeout;
  HolderInfo holder{request->holder().host(), request->holder().pid(),
                    request->holder().rank()};
  // A holder on this host is watched by its pid: the kernel's, not the
  // client's claim (docs/SECURITY.md).
  if (std::optional<PeerCredentials> peer = PeerOf(*context);
      peer.has_value() && holder.host == options_.host_id) {
    holder.pid = peer->pid;
  }
  EntryKey key = *id;
  if (request->wait() && request->wake_file() &&
      options_.wake_notices != nullptr) {
    ParkOnNotice(key, holder, options_.env->Now() + wait, context, reactor,
                 response, started);
    return reactor;
  }
  LockTable::WaiterId waiter = locks_->Acquire(
      key, holder, request->wait(), options_.env->Now() + wait,
      [this, key, context, reactor, response, started](LockEvent event) {
        OnLockEvent(key, std::move(event), context, reactor, response, started);
      });
  reactor->set_waiter(waiter);
  return reactor;
}

void CompileCacheService::ParkOnNotice(
    const EntryKey& id, const HolderInfo& holder, absl::Time deadline,
    grpc::CallbackServerContext* context, LockReactor* reactor,
    v1::LockResponse* response, absl::Time started) {
  // Whoever takes `mu` first decides how the caller is answered: the table's
  // callback before a notice is joined answers the call; after, the notice.
  struct Parking {
    absl::Mutex mu;
    bool on_call ABSL_GUARDED_BY(mu) = false;
    WakeNotices::Notice notice ABSL_GUARDED_BY(mu);
  };
  auto parking = std::make_shared<Parking>();
  const LockTable::WaiterId waiter =
      locks_->Acquire(id, holder, /*wait=*/true, deadline,
                      [this, id, context, reactor, response, started,
                       parking](LockEvent event) {
                        WakeNotices::Notice notice;
                        {
                          absl::MutexLock lock(&parking->mu);
                          parking->on_call = parking->notice == nullptr;
                          notice = parking->notice;
                        }
                        if (notice == nullptr) {
                          OnLockEvent(id, std::move(event), context, reactor,
                                      response, started);
                        } else {
                          OnNoticeEvent(id, notice, std::move(event), started);
                        }
                      });
  if (waiter == 0) return;  // answered at once
  absl::MutexLock lock(&parking->mu);
  if (parking->on_call) return;
  absl::StatusOr<WakeNotices::Notice> notice = options_.wake_notices->Join(id);
  if (!notice.ok()) {
    // Parked as a call, which works whatever the local disk says.
    log::Warning("wake_notice_failed", {{"entry", id.Canonical()},
                                        {"error", notice.status().ToString()}});
    reactor->set_waiter(waiter);
    return;
  }
  parking->notice = *notice;
  response->set_outcome(v1::LockResponse::PARKED);
  response->set_wake_file((*notice)->path());
  reactor->Finish(grpc::Status::OK);
}

void CompileCacheService::OnNoticeEvent(const EntryKey& id,
                                        const WakeNotices::Notice& notice,
                                        LockEvent event, absl::Time started) {
  v1::LockResponse answer;
  switch (event.outcome) {
    case LockOutcome::kReady:
    case LockOutcome::kFailed:
      if (notice->answered()) {
        // The key's other waiters' answer is this one's too; only counted.
        answer.set_outcome(event.outcome == LockOutcome::kReady
                               ? v1::LockResponse::READY
                               : v1::LockResponse::FAILED);
        CountLock(answer, grpc::Status::OK, started);
        return;
      }
      CountLock(answer, CompleteLock(id, std::move(event), false, &answer),
                started);
      options_.wake_notices->Answer(id, notice, answer.SerializeAsString());
      return;
    case LockOutcome::kTimedOut:
      // The caller's own wait on the notice ends at the same deadline.
      answer.set_outcome(v1::LockResponse::TIMED_OUT);
      CountLock(answer, grpc::Status::OK, started);
      return;
    case LockOutcome::kGranted:
      // Handed on at once; the notice's callers ask again and one of them
      // is granted.
      (void)locks_->Release(event.lease_id, id, nullptr);
      break;
    default:  // kShutdown: asked again, the daemon says why
      break;
  }
  options_.wake_notices->Answer(id, notice, "");
}

void CompileCacheService::OnLockEvent(const EntryKey& id, LockEvent event,
                                      grpc::CallbackServerContext* context,
                                      LockReactor* reactor,
                                      v1::LockResponse* response,
                                      absl::Time started) {
  auto finish = [this, id, context, reactor, response,
                 started](LockEvent event) {
    grpc::Status status =
        CompleteLock(id, std::move(event), context->IsCancelled(), response);
    CountLock(*response, status, started);
    if (status.ok() && response->outcome() == v1::LockResponse::GRANTED) {
      // Who compiles what, and when the call that got the lease came and
      // was answered (bench/storm's step profile reads both).
      log::Info(
          "lock_granted",
          {{"entry", id.Canonical()},
           {"lease", response->lease().lease_id()},
           {"started_unix_us", absl::ToUnixMicros(started)},
           {"answered_unix_us", absl::ToUnixMicros(options_.env->Now())}});
    }
    reactor->Finish(std::move(status));
  };
  // Before anyone compiles, S3 is asked under the fresh lease, so one host
  // of the cluster downloads while the others wait as for a compile. After
  // the fetch the usual grant path re-checks the store: READY if it was
  // published, else GRANTED.
  const bool ask_remote =
      options_.remote != nullptr && event.outcome == LockOutcome::kGranted &&
      !context->IsCancelled() && !StoreFor(id).HasDoneRecord(id) &&
      !StoreFor(id).FindFailure(id).has_value();
  if (!ask_remote) {
    finish(std::move(event));
    return;
  }
  const std::string lease_id = event.lease_id;
  options_.remote->FetchUnderLease(
      id, lease_id,
      [finish = std::move(finish), event = std::move(event)](
          FetchOutcome) mutable { finish(std::move(event)); });
}

grpc::Status CompileCacheService::CompleteLock(const EntryKey& id,
                                               LockEvent event,
                                               bool client_gone,
                                               v1::LockResponse* response) {
  switch (event.outcome) {
    case LockOutcome::kGranted: {
      if (client_gone) {
        // Nobody will compile under this lease: hand it on at once.
        (void)locks_->Release(event.lease_id, id, nullptr);
        return grpc::Status(grpc::StatusCode::CANCELLED, "client went away");
      }
      // The entry may have appeared between the first check and the grant
      // (published by a daemon-less process, or just before a handover).
      absl::StatusOr<bool> answered = AnswerWithoutLock(id, response);
      if (answered.ok() && *answered) {
        if (locks_->BeginPublish(event.lease_id, id).ok()) {
          locks_->FinishPublish(event.lease_id,
                                response->outcome() == v1::LockResponse::READY
                                    ? &response->entry()
                                    : nullptr);
        }
        if (response->outcome() == v1::LockResponse::FAILED) {
          (void)locks_->Release(event.lease_id, id, &response->failure());
        }
        return grpc::Status::OK;
      }
      response->set_outcome(v1::LockResponse::GRANTED);
      v1::Lease* lease = response->mutable_lease();
      lease->set_lease_id(event.lease_id);
      *lease->mutable_id() = id.ToProto();
      lease->set_ttl_ms(absl::ToInt64Milliseconds(locks_->lease_ttl()));
      lease->set_staging_dir(options_.staging_dir);
      return grpc::Status::OK;
    }
    case LockOutcome::kReady:
      response->set_outcome(v1::LockResponse::READY);
      *response->mutable_entry() = ServeLocally(tier_, id, event.entry);
      return grpc::Status::OK;
    case LockOutcome::kFailed:
      response->set_outcome(v1::LockResponse::FAILED);
      *response->mutable_failure() = std::move(event.failure);
      return grpc::Status::OK;
    case LockOutcome::kTimedOut:
      response->set_outcome(v1::LockResponse::TIMED_OUT);
      return grpc::Status::OK;
    case LockOutcome::kBusy:
      response->set_outcome(v1::LockResponse::BUSY);
      return grpc::Status::OK;
    case LockOutcome::kTooMany:
      return grpc::Status(
          grpc::StatusCode::RESOURCE_EXHAUSTED,
          "holder.pid: this process holds the most leases allowed "
          "(--max_leases_per_pid); publish or unlock one first");
    case LockOutcome::kOverloaded:
      return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                          "wait: this host has the most lock waiters allowed "
                          "(--max_lock_waiters) parked already; retry later");
    case LockOutcome::kShutdown:
      break;
  }
  return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                      "neffd is draining or shutting down; retry the lock");
}

grpc::Status CompileCacheService::KeepAlive(grpc::ServerContext*,
                                            const v1::KeepAliveRequest* request,
                                            v1::KeepAliveResponse* response) {
  if (absl::Status s = ValidateLeaseId(request->lease_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  if (absl::Status s = locks_->KeepAlive(request->lease_id()); !s.ok()) {
    return ToGrpcStatus(s);
  }
  response->set_ttl_ms(absl::ToInt64Milliseconds(locks_->lease_ttl()));
  return grpc::Status::OK;
}

grpc::Status CompileCacheService::Publish(grpc::ServerContext* context,
                                          const v1::PublishRequest* request,
                                          v1::PublishResponse* response) {
  absl::StatusOr<EntryKey> id =
      ValidatePublishRequest(*request, limits(), options_.staging_dir);
  if (!id.ok()) return ToGrpcStatus(id.status());
  const std::optional<PeerCredentials> peer = PeerOf(*context);
  if (peer.has_value() &&
      request->content_case() == v1::PublishRequest::kInlineBytes &&
      !UidInGroup(peer->uid, geteuid(), options_.ranks_group)) {
    log::Warning("publish_refused",
                 {{"entry", id->Canonical()}, {"peer", DescribePeer(peer)}});
    return MakeGrpcStatus(
        grpc::StatusCode::PERMISSION_DENIED,
        absl::StrCat("inline_bytes: uid ", peer->uid,
                     " is not in the ranks' group ", options_.ranks_group,
                     " (--socket_group); only its members publish"));
  }
  log::Info("publish_call",
            {{"entry", id->Canonical()}, {"peer", DescribePeer(peer)}});
  Artifact artifact;
  artifact.lease_id = request->lease_id();
  if (request->content_case() == v1::PublishRequest::kInlineBytes) {
    artifact.inline_bytes = request->inline_bytes();
  } else {
    artifact.staged_path = request->staged_path();
  }
  artifact.size = request->size();
  artifact.sha256 = request->sha256();
  artifact.metadata.insert(request->metadata().begin(),
                           request->metadata().end());
  // Queued for S3 (durably) before the store may hold the entry.
  std::unique_ptr<PublishIntent> upload =
      options_.remote != nullptr ? options_.remote->NewUploadIntent() : nullptr;
  absl::StatusOr<Published> published =
      publisher_->Publish(*id, artifact, upload.get());
  if (!published.ok()) return ToGrpcStatus(published.status());
  telemetry_->CountPublish(id->ns(), published->already_cached,
                           published->entry.size());
  response->set_outcome(published->already_cached
                            ? v1::PublishResponse::ALREADY_CACHED
                            : v1::PublishResponse::PUBLISHED);
  *response->mutable_entry() = std::move(published->entry);
  return grpc::Status::OK;
}

grpc::Status CompileCacheService::Unlock(grpc::ServerContext*,
                                         const v1::UnlockRequest* request,
                                         v1::UnlockResponse*) {
  absl::StatusOr<EntryKey> id = ValidateUnlockRequest(*request, limits());
  if (!id.ok()) return ToGrpcStatus(id.status());
  switch (request->outcome()) {
    case v1::UnlockRequest::ABANDONED:
      return ToGrpcStatus(locks_->Release(request->lease_id(), *id, nullptr));
    case v1::UnlockRequest::FAILED: {
      absl::StatusOr<RecordedFailure> recorded =
          publisher_->RecordFailure(*id, request->lease_id(), request->log());
      if (!recorded.ok()) return ToGrpcStatus(recorded.status());
      telemetry_->CountFailureRecorded();
      return ToGrpcStatus(recorded->released);
    }
    default:
      return Invalid("outcome: must be ABANDONED or FAILED");
  }
}

void CompileCacheService::CountLock(const v1::LockResponse& response,
                                    const grpc::Status& status,
                                    absl::Time started) {
  std::string outcome =
      status.ok() ? absl::AsciiStrToLower(
                        v1::LockResponse::Outcome_Name(response.outcome()))
      : status.error_code() == grpc::StatusCode::UNAVAILABLE ? "unavailable"
                                                             : "cancelled";
  telemetry_->CountLock(outcome, options_.env->Now() - started);
}

v1::Stats CompileCacheService::CumulativeStats() const {
  v1::Stats stats;
  telemetry_->Fill(&stats);
  LockTable::Counts locks = locks_->counts();
  stats.set_lock_grants(locks.grants);
  stats.set_lock_waits(locks.waits);
  stats.set_lock_timeouts(locks.timeouts);
  stats.set_leases_revoked(locks.revoked);
  stats.set_leases_held(locks.leases_held);
  stats.set_waiters(locks.waiters);
  stats.set_draining(locks_->draining());
  Index::Totals totals = catalog_->index().totals();
  stats.set_entries(totals.entries);
  stats.set_bytes(totals.bytes);
  stats.set_quarantined(catalog_->StoreFor(Namespace::kNeff).quarantined() +
                        catalog_->StoreFor(Namespace::kHlo).quarantined());
  stats.set_store_metadata_ops(options_.shared_ops());
  stats.set_index_write_failures(catalog_->index_write_failures());
  absl::Time measured;
  *stats.mutable_leftovers() = options_.leftovers(&measured);
  if (measured != absl::InfinitePast()) {
    stats.set_leftovers_measured_unix_ms(absl::ToUnixMillis(measured));
  }
  if (tier_ != nullptr) {
    stats.set_local_tier_bytes(tier_->used_bytes());
    stats.set_local_tier_filled_bytes(tier_->filled_bytes());
  }
  stats.set_uptime_ms(
      absl::ToInt64Milliseconds(options_.env->Now() - started_));
  if (options_.remote != nullptr) options_.remote->FillStats(&stats);
  options_.coordinator_stats(&stats);
  // Kept by the index with each write: GetStats and every metrics textfile
  // write must not walk a million entries.
  for (const Index::VersionTotals& v : catalog_->index().version_totals()) {
    v1::VersionStats* out = stats.add_versions();
    out->set_namespace_(std::string(NamespaceName(v.ns)));
    out->set_compiler_version(v.compiler_version);
    out->set_entries(v.totals.entries);
    out->set_bytes(v.totals.bytes);
  }
  return stats;
}

grpc::Status CompileCacheService::GetStats(grpc::ServerContext*,
                                           const v1::GetStatsRequest*,
                                           v1::Stats* response) {
  *response = telemetry_->SinceReset(CumulativeStats());
  return grpc::Status::OK;
}

std::optional<PeerCredentials> CompileCacheService::PeerOf(
    const grpc::ServerContextBase& context) const {
  if (options_.peers == nullptr) return std::nullopt;
  return options_.peers->Find(context.peer());
}

}  // namespace neffd
