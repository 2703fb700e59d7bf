// daemon/server/health_service.h
//
// HealthService implements grpc.health.v1.Health from Debian's grpc-proto
// (compiled in, so server reflection can describe it; gRPC's built-in default
// health service is not in the descriptor pool). The overall service ("")
// and "neffd.v1.CompileCache" report SERVING, or NOT_SERVING while the daemon
// drains or shuts down; "neffd.v1.CacheAdmin" is SERVING until shutdown (an
// operator can still undrain). Other names are NOT_FOUND.
//
// Watch streams the current status and every change. Thread-safe.
// Shutdown() ends every Watch so the server can stop.
#ifndef NEFFD_DAEMON_SERVER_HEALTH_SERVICE_H_
#define NEFFD_DAEMON_SERVER_HEALTH_SERVICE_H_

#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace neffd {

class HealthService final : public grpc::health::v1::Health::Service {
 public:
  using ServingStatus = grpc::health::v1::HealthCheckResponse::ServingStatus;

  void SetDraining(bool draining);
  void Shutdown();

  grpc::Status Check(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::health::v1::HealthCheckResponse* response) override;
  grpc::Status Watch(grpc::ServerContext* context,
                     const grpc::health::v1::HealthCheckRequest* request,
                     grpc::ServerWriter<grpc::health::v1::HealthCheckResponse>*
                         writer) override;

 private:
  // The status of `service`, or false if the name is unknown.
  bool StatusOf(const std::string& service, ServingStatus* status) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  bool draining_ ABSL_GUARDED_BY(mu_) = false;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;  // bumped on every change
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_SERVER_HEALTH_SERVICE_H_
