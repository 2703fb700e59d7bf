// daemon/server/server_options.h
//
// The gRPC server settings neffd serves with, in one place so that the bare
// echo server of bench/lookup_bench runs with exactly the same ones (its
// figure is the floor for neffd's Lookup only if nothing else differs).
//
// ConfigureServer applies them to a builder before BuildAndStart; it adds no
// port and no service.
#ifndef NEFFD_DAEMON_SERVER_SERVER_OPTIONS_H_
#define NEFFD_DAEMON_SERVER_SERVER_OPTIONS_H_

#include <cstdint>

#include "daemon/server/server_stop.h"
#include "grpcpp/server_builder.h"

namespace neffd {

// `max_receive_bytes` bounds one request (an inline Publish plus framing).
// `calls` (not null; it must outlive the server) counts the server's calls
// in progress, so that StopServers knows when they are done.
void ConfigureServer(grpc::ServerBuilder& builder, uint64_t max_receive_bytes,
                     CallTracker* calls);

}  // namespace neffd

#endif  // NEFFD_DAEMON_SERVER_SERVER_OPTIONS_H_
