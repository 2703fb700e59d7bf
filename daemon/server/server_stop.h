// daemon/server/server_stop.h
//
// Stopping gRPC servers as soon as their calls are done, not when the grace
// runs out. grpc::Server::Shutdown(deadline) sends each connection a
// graceful GOAWAY and waits until the client has answered its ping; a
// client with no call in progress reads its socket only on gRPC's 5 s
// backup poll (and the server's own wait gives up after 20 s), so 32 idle
// ranks held a SIGTERM for the whole --shutdown_grace.
//
// CallTracker counts the calls a server has in progress: ConfigureServer
// (server_options.h) installs it as a server interceptor, which lives from
// a call's start to its end. StopServers shuts servers down, waits (at most
// `grace`) until the calls that were in progress when it began have ended,
// and then closes the connections that are left, which carry no call. So
// in-flight calls (a Publish copying a large file) keep the whole grace,
// and idle connections cost nothing. Long waits that only the shutdown
// ends (parked Lock calls, Hold and Watch streams) must be ended first, by
// their owners: they count as calls in progress.
//
// CallTracker is thread-safe and must outlive the servers it counts for.
#ifndef NEFFD_DAEMON_SERVER_SERVER_STOP_H_
#define NEFFD_DAEMON_SERVER_SERVER_STOP_H_

#include <atomic>
#include <cstdint>
#include <initializer_list>
#include <memory>

#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "grpcpp/support/server_interceptor.h"
#include "store/env.h"

namespace neffd {

class CallTracker {
 public:
  // For ServerBuilder::experimental().SetInterceptorCreators; one per
  // server, all counting here.
  std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
  NewInterceptorFactory();

  // From now on, calls that start are not counted (the servers are
  // stopping: gRPC refuses them, or StopServers cancels them).
  void StopCounting();
  // Calls in progress that started before StopCounting.
  int64_t in_flight() const;

 private:
  class Interceptor;
  class Factory;

  // The count, plus kStopped once StopCounting ran. A call adds one as it
  // starts and takes it back at once if kStopped was set: so no call is
  // counted after the flag, and none before it is missed.
  static constexpr int64_t kStopped = int64_t{1} << 62;
  std::atomic<int64_t> state_{0};
};

// Shuts `servers` down (no new calls; the listening sockets should already
// be closed) and returns once they have stopped: when the calls `calls`
// counted have ended, at once after; else at `grace`, when gRPC cancels
// what is left (logged `shutdown_grace_expired calls=N`). The grace is
// measured, and each server stopped on a thread, through `env`.
void StopServers(std::initializer_list<grpc::Server*> servers,
                 CallTracker& calls, absl::Duration grace, Env* env);

}  // namespace neffd

#endif  // NEFFD_DAEMON_SERVER_SERVER_STOP_H_
