// proto/call_deadline.h
//
// A gRPC call's context whose deadline is `timeout` from now on gRPC's own
// monotonic clock (gRPC keeps deadlines on its clock, not an Env's), for
// every client neffd has: the ranks' and neffctl's calls to the daemon
// (client/) and the daemon's calls to etcd (daemon/etcd/). Here, beside
// the other headers both sides share, because the daemon may not depend on
// client/.
#ifndef NEFFD_PROTO_CALL_DEADLINE_H_
#define NEFFD_PROTO_CALL_DEADLINE_H_

#include <memory>

#include "absl/time/time.h"
#include "grpc/support/time.h"
#include "grpcpp/client_context.h"

namespace neffd {

inline std::unique_ptr<grpc::ClientContext> ContextWithTimeout(
    absl::Duration timeout) {
  auto context = std::make_unique<grpc::ClientContext>();
  context->set_deadline(gpr_time_add(
      gpr_now(GPR_CLOCK_MONOTONIC),
      gpr_time_from_micros(absl::ToInt64Microseconds(timeout), GPR_TIMESPAN)));
  return context;
}

}  // namespace neffd

#endif  // NEFFD_PROTO_CALL_DEADLINE_H_
