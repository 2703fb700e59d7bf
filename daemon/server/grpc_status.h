// daemon/server/grpc_status.h
//
// The daemon's gRPC answers: absl::Status → grpc::Status keeping the code
// and the message (absl and gRPC share canonical code numbers), with every
// message bounded. gRPC carries the message in an HTTP/2 trailer, and its
// clients refuse metadata over 8 KiB (GRPC_ARG_MAX_METADATA_SIZE) by failing
// the call or, at times, dropping the whole connection; an error that quotes
// a megabyte of bad input must still reach the client as that error. A
// message longer than kMaxStatusMessageBytes keeps its head (the field) and
// its tail (what was expected) and says how much was cut.
#ifndef NEFFD_DAEMON_SERVER_GRPC_STATUS_H_
#define NEFFD_DAEMON_SERVER_GRPC_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "grpcpp/support/status.h"

namespace neffd {

inline constexpr size_t kMaxStatusMessageBytes = 1024;

inline grpc::Status MakeGrpcStatus(grpc::StatusCode code,
                                   absl::string_view message) {
  if (message.size() <= kMaxStatusMessageBytes) {
    return grpc::Status(code, std::string(message));
  }
  constexpr size_t kHead = 640, kTail = 256;
  return grpc::Status(
      code, absl::StrCat(message.substr(0, kHead), "...[",
                         message.size() - kHead - kTail, " bytes cut]...",
                         message.substr(message.size() - kTail)));
}

inline grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return MakeGrpcStatus(static_cast<grpc::StatusCode>(status.code()),
                        status.message());
}

}  // namespace neffd

#endif  // NEFFD_DAEMON_SERVER_GRPC_STATUS_H_
