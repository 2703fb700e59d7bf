// echo_server: the bare gRPC unary service that lookup_bench measures as the
// floor under neffd's Lookup. It serves bench/echo.proto on --address with
// neffd's own server settings (daemon/service/server_options.h) and the same
// synchronous service API that serves Lookup, and does nothing else per call,
// so the difference between the two is what neffd's Lookup costs.
//
// Runs until SIGTERM or SIGINT.
#include <signal.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/synchronization/mutex.h"
#include "bench/echo.grpc.pb.h"
#include "daemon/service/server_options.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/server_credentials.h"

ABSL_FLAG(std::string, address, "", "unix:/path of the socket to serve");

namespace neffd::bench {
namespace {

class EchoService final : public Echo::Service {
  grpc::Status Echo(grpc::ServerContext*, const EchoRequest* request,
                    EchoResponse* response) override {
    response->mutable_payload()->assign(request->reply_bytes(), 'e');
    return grpc::Status::OK;
  }
};

int Main(int argc, char** argv) {
  // As neffd does (daemon/main.cc): Debian's absl runs the deadlock
  // detector on every lock otherwise, gRPC's own locks included.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  absl::ParseCommandLine(argc, argv);
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  EchoService service;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::GetFlag(FLAGS_address),
                           grpc::InsecureServerCredentials());
  builder.RegisterService(&service);
  ConfigureServer(builder, 1 << 20);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr) {
    std::fprintf(stderr, "echo_server: cannot listen on %s\n",
                 absl::GetFlag(FLAGS_address).c_str());
    return 1;
  }
  int sig = 0;
  sigwait(&stop, &sig);
  server->Shutdown();
  return 0;
}

}  // namespace
}  // namespace neffd::bench

int main(int argc, char** argv) { return neffd::bench::Main(argc, argv); }
