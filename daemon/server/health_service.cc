#include "daemon/server/health_service.h"

#include "absl/time/time.h"
#include "daemon/server/grpc_status.h"

namespace neffd {

using grpc::health::v1::HealthCheckRequest;
using grpc::health::v1::HealthCheckResponse;

void HealthService::SetDraining(bool draining) {
  absl::MutexLock lock(&mu_);
  draining_ = draining;
  ++version_;
}

void HealthService::Shutdown() {
  absl::MutexLock lock(&mu_);
  shut_down_ = true;
  ++version_;
}

bool HealthService::StatusOf(const std::string& service,
                             ServingStatus* status) const {
  const bool serving = !shut_down_ && !draining_;
  if (service.empty() || service == "neffd.v1.CompileCache") {
    *status = serving ? HealthCheckResponse::SERVING
                      : HealthCheckResponse::NOT_SERVING;
    return true;
  }
  if (service == "neffd.v1.CacheAdmin") {
    *status = shut_down_ ? HealthCheckResponse::NOT_SERVING
                         : HealthCheckResponse::SERVING;
    return true;
  }
  return false;
}

grpc::Status HealthService::Check(grpc::ServerContext*,
                                  const HealthCheckRequest* request,
                                  HealthCheckResponse* response) {
  absl::MutexLock lock(&mu_);
  ServingStatus status;
  if (!StatusOf(request->service(), &status)) {
    return MakeGrpcStatus(grpc::StatusCode::NOT_FOUND,
                          "service: unknown service '" + request->service() +
                              "'; ask for \"\", neffd.v1.CompileCache or "
                              "neffd.v1.CacheAdmin");
  }
  response->set_status(status);
  return grpc::Status::OK;
}

grpc::Status HealthService::Watch(
    grpc::ServerContext* context, const HealthCheckRequest* request,
    grpc::ServerWriter<HealthCheckResponse>* writer) {
  uint64_t sent_version = ~uint64_t{0};
  for (;;) {
    HealthCheckResponse response;
    {
      absl::MutexLock lock(&mu_);
      // Wake on a change, and now and then to notice a cancelled call.
      auto changed = [this, sent_version]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
        return version_ != sent_version;
      };
      mu_.AwaitWithTimeout(absl::Condition(&changed), absl::Seconds(1));
      if (context->IsCancelled()) return grpc::Status::CANCELLED;
      if (version_ == sent_version) continue;
      sent_version = version_;
      ServingStatus status;
      response.set_status(StatusOf(request->service(), &status)
                              ? status
                              : HealthCheckResponse::SERVICE_UNKNOWN);
      if (shut_down_) {
        // The last word: then end the stream so the server can stop.
        writer->Write(response);
        return grpc::Status::OK;
      }
    }
    if (!writer->Write(response)) return grpc::Status::OK;
  }
}

}  // namespace neffd
