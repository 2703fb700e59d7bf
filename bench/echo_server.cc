// echo_server: the bare gRPC unary service that lookup_bench measures as the
// floor under neffd's Lookup. It serves bench/echo.proto on --address with
// neffd's own server settings (daemon/server/server_options.h) and the same
// mix of service APIs (the measured call on the callback API, as Lookup is;
// another method synchronous, as Publish is), and does nothing else per call,
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
#include "daemon/server/server_options.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/security/server_credentials.h"

ABSL_FLAG(std::string, address, "", "unix:/path of the socket to serve");
ABSL_FLAG(
    std::string, api, "mixed",
    "mixed (as neffd: Echo on the callback API, Park synchronous), sync or "
    "callback (every method on that API; for comparison)");
ABSL_FLAG(int, max_pollers, 0, "override MAX_POLLERS (experiments only)");
ABSL_FLAG(int, num_cqs, 0, "override NUM_CQS (experiments only)");

namespace neffd::bench {
namespace {

void Answer(const EchoRequest& request, EchoResponse* response) {
  response->mutable_payload()->assign(request.reply_bytes(), 'e');
}

// Answers on the calling thread, as neffd's Lookup does for a hit.
grpc::ServerUnaryReactor* AnswerNow(grpc::CallbackServerContext* context,
                                    const EchoRequest& request,
                                    EchoResponse* response) {
  Answer(request, response);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

// neffd's shape: the unary call measured (Lookup there, Echo here) on the
// callback API, other methods (Publish there, Park here) synchronous.
class MixedEchoService final
    : public Echo::WithCallbackMethod_Echo<Echo::Service> {
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const EchoRequest* request,
                                 EchoResponse* response) override {
    return AnswerNow(context, *request, response);
  }
  grpc::Status Park(grpc::ServerContext*, const EchoRequest* request,
                    EchoResponse* response) override {
    Answer(*request, response);
    return grpc::Status::OK;
  }
};

// For comparison: every method synchronous.
class SyncEchoService final : public Echo::Service {
  grpc::Status Echo(grpc::ServerContext*, const EchoRequest* request,
                    EchoResponse* response) override {
    Answer(*request, response);
    return grpc::Status::OK;
  }
};

// For comparison: every method on the callback API.
class CallbackEchoService final : public Echo::CallbackService {
  grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context,
                                 const EchoRequest* request,
                                 EchoResponse* response) override {
    return AnswerNow(context, *request, response);
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

  MixedEchoService mixed;
  SyncEchoService sync;
  CallbackEchoService callback;
  CallTracker calls;  // outlives the server
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::GetFlag(FLAGS_address),
                           grpc::InsecureServerCredentials());
  const std::string api = absl::GetFlag(FLAGS_api);
  if (api == "sync") {
    builder.RegisterService(&sync);
  } else if (api == "callback") {
    builder.RegisterService(&callback);
  } else {
    builder.RegisterService(&mixed);
  }
  // neffd's default limit (--max_inline_bytes plus framing), and its call
  // counting (an interceptor on every call).
  ConfigureServer(builder, (16 << 20) + (1 << 20), &calls);
  if (absl::GetFlag(FLAGS_max_pollers) > 0) {
    builder.SetSyncServerOption(
        grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
        absl::GetFlag(FLAGS_max_pollers));
  }
  if (absl::GetFlag(FLAGS_num_cqs) > 0) {
    builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::NUM_CQS,
                                absl::GetFlag(FLAGS_num_cqs));
  }
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
