#include "daemon/server/server_stop.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "daemon/log/log.h"
#include "grpc/grpc.h"

namespace neffd {
namespace {

// How often the stop checks whether the counted calls have ended: the
// delay it adds to a shutdown, at most.
constexpr absl::Duration kPoll = absl::Milliseconds(5);

}  // namespace

class CallTracker::Interceptor : public grpc::experimental::Interceptor {
 public:
  explicit Interceptor(std::atomic<int64_t>* state) : state_(state) {
    if (state_->fetch_add(1, std::memory_order_acq_rel) & kStopped) {
      state_->fetch_sub(1, std::memory_order_acq_rel);
      state_ = nullptr;
    }
  }
  // gRPC destroys a call's interceptors once the call has ended.
  ~Interceptor() override {
    if (state_ != nullptr) state_->fetch_sub(1, std::memory_order_acq_rel);
  }

  void Intercept(
      grpc::experimental::InterceptorBatchMethods* methods) override {
    methods->Proceed();
  }

 private:
  std::atomic<int64_t>* state_;  // null: not counted
};

class CallTracker::Factory
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  // The pointer is stored and loaded atomically: gRPC calls the factory on
  // threads it may have started before this factory existed (a second
  // server's calls on the first one's threads), and hands the factory over
  // through its own, uninstrumented synchronization, which ThreadSanitizer
  // cannot see.
  explicit Factory(std::atomic<int64_t>* state) {
    state_.store(state, std::memory_order_release);
  }
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo*) override {
    return new Interceptor(state_.load(std::memory_order_acquire));
  }

 private:
  std::atomic<std::atomic<int64_t>*> state_;
};

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
CallTracker::NewInterceptorFactory() {
  return std::make_unique<Factory>(&state_);
}

void CallTracker::StopCounting() {
  state_.fetch_or(kStopped, std::memory_order_acq_rel);
}

int64_t CallTracker::in_flight() const {
  return state_.load(std::memory_order_acquire) & ~kStopped;
}

void StopServers(std::initializer_list<grpc::Server*> servers,
                 CallTracker& calls, absl::Duration grace, Env* env) {
  calls.StopCounting();
  const auto deadline = absl::ToChronoTime(env->Now() + grace);
  std::atomic<size_t> running{servers.size()};
  std::vector<EnvThread> stopping;
  for (grpc::Server* server : servers) {
    stopping.push_back(
        env->StartThread("neffd-shutdown", [server, deadline, &running] {
          server->Shutdown(deadline);
          running.fetch_sub(1, std::memory_order_acq_rel);
        }));
  }
  // The grace on the monotonic clock, waited in relative sleeps: a wall
  // clock that disagrees with the kernel's (libfaketime) must not stretch
  // it (docs/ARCHITECTURE.md, "Ticks use relative sleeps").
  const absl::Duration end = env->MonotonicNow() + grace;
  auto within_grace = [env, end] { return env->MonotonicNow() < end; };
  while (calls.in_flight() > 0 && within_grace()) env->SleepFor(kPoll);
  const int64_t cut_short = calls.in_flight();
  if (cut_short > 0) {
    log::Warning("shutdown_grace_expired",
                 {{"calls", absl::StrCat(cut_short)}});
  }
  // Only connections without a call are left: close them, as gRPC does at
  // the deadline. Again until the servers have stopped, since a server's
  // Shutdown may not have begun at the first round (a TCP connection
  // accepted meanwhile would wait for its ping again).
  while (cut_short == 0 && running.load(std::memory_order_acquire) > 0 &&
         within_grace()) {
    for (grpc::Server* server : servers) {
      grpc_server_cancel_all_calls(server->c_server());
    }
    env->SleepFor(kPoll);
  }
  for (EnvThread& thread : stopping) thread.Join();
}

}  // namespace neffd
