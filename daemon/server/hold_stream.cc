// CompileCache.Hold: a lease bound to its holder's connection (see
// compile_cache_service.h and the Hold comment in neffd.proto).
#include "absl/strings/str_cat.h"
#include "daemon/log/log.h"
#include "daemon/server/compile_cache_service.h"
#include "daemon/server/grpc_status.h"
#include "daemon/server/request_validation.h"

namespace neffd {

// One holder's stream: read a lease id, renew, answer, read again. Reads and
// writes alternate, so only OnCancel can run beside another reaction; the
// mutex covers what it shares with them. Deletes itself in OnDone.
class CompileCacheService::HoldReactor
    : public grpc::ServerBidiReactor<v1::KeepAliveRequest,
                                     v1::KeepAliveResponse> {
 public:
  explicit HoldReactor(CompileCacheService* service) : service_(service) {
    StartRead(&request_);
  }

  // From EndHolds: the daemon is stopping; the lease is left to it.
  void End() {
    {
      absl::MutexLock lock(&mu_);
      lease_id_.clear();
    }
    FinishOnce(
        grpc::Status(grpc::StatusCode::UNAVAILABLE, "neffd is shutting down"));
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      // The holder closed the stream, or its connection broke: either way
      // nobody holds the lease any more.
      Revoke();
      FinishOnce(grpc::Status::OK);
      return;
    }
    absl::Status status = Renew(request_.lease_id());
    if (!status.ok()) {
      FinishOnce(ToGrpcStatus(status));
      return;
    }
    response_.set_ttl_ms(
        absl::ToInt64Milliseconds(service_->locks_->lease_ttl()));
    StartWrite(&response_);
  }

  void OnWriteDone(bool ok) override {
    if (!ok) {
      Revoke();
      FinishOnce(grpc::Status(grpc::StatusCode::CANCELLED, "holder gone"));
      return;
    }
    StartRead(&request_);
  }

  void OnCancel() override { Revoke(); }

  void OnDone() override {
    {
      absl::MutexLock lock(&service_->holds_mu_);
      service_->holds_.erase(this);
    }
    delete this;
  }

 private:
  // Binds the stream to `lease_id` on its first message and renews it.
  absl::Status Renew(const std::string& lease_id) {
    if (absl::Status s = ValidateLeaseId(lease_id); !s.ok()) return s;
    {
      absl::MutexLock lock(&mu_);
      if (!bound_.empty() && lease_id != bound_) {
        return absl::InvalidArgumentError(
            "lease_id: a Hold stream keeps the one lease it started with");
      }
      bound_ = lease_id;
      lease_id_ = lease_id;
    }
    return service_->locks_->KeepAlive(lease_id);
  }

  void Revoke() {
    std::string lease_id;
    {
      absl::MutexLock lock(&mu_);
      lease_id.swap(lease_id_);
    }
    if (!lease_id.empty()) service_->locks_->HolderGone(lease_id);
  }

  void FinishOnce(grpc::Status status) {
    {
      absl::MutexLock lock(&mu_);
      if (finished_) return;
      finished_ = true;
    }
    Finish(std::move(status));
  }

  CompileCacheService* const service_;
  v1::KeepAliveRequest request_;
  v1::KeepAliveResponse response_;
  absl::Mutex mu_;
  std::string bound_ ABSL_GUARDED_BY(mu_);
  // The lease to revoke if the stream breaks; empty once there is none.
  std::string lease_id_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse>*
CompileCacheService::Hold(grpc::CallbackServerContext*) {
  auto* reactor = new HoldReactor(this);
  bool ended;
  {
    absl::MutexLock lock(&holds_mu_);
    ended = holds_ended_;
    if (!ended) holds_.insert(reactor);
  }
  if (ended) reactor->End();
  return reactor;
}

void CompileCacheService::EndHolds() {
  // Under the mutex: a reactor leaves holds_ (and is deleted) in OnDone,
  // which takes it. Finish never runs OnDone inline on a server reactor.
  absl::MutexLock lock(&holds_mu_);
  holds_ended_ = true;
  if (!holds_.empty()) {
    log::Warning("hold_streams_ended",
                 {{"streams", absl::StrCat(holds_.size())}});
  }
  for (HoldReactor* reactor : holds_) reactor->End();
}

}  // namespace neffd
