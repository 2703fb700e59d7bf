// daemon/service/grpc_status.h
//
// absl::Status → grpc::Status, keeping the code and the message (absl and
// gRPC share canonical code numbers).
#ifndef NEFFD_DAEMON_SERVICE_GRPC_STATUS_H_
#define NEFFD_DAEMON_SERVICE_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace neffd {

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

}  // namespace neffd

#endif  // NEFFD_DAEMON_SERVICE_GRPC_STATUS_H_
