#include "daemon/locks/io_workers.h"

#include <utility>

namespace neffd {

IoWorkers::IoWorkers(int threads, Env* env) : env_(env) {
  for (int i = 0; i < threads; ++i) {
    threads_.push_back(env->StartThread("neffd-lock-io", [this] { Work(); }));
  }
}

IoWorkers::~IoWorkers() {
  std::deque<std::function<void()>> dropped;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    dropped.swap(queue_);
    changed_.SignalAll();
  }
  for (EnvThread& t : threads_) t.Join();
}

void IoWorkers::Run(std::function<void()> call) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  queue_.push_back(std::move(call));
  changed_.Signal();
}

void IoWorkers::Work() {
  for (;;) {
    std::function<void()> call;
    {
      absl::MutexLock lock(&mu_);
      while (!stopping_ && queue_.empty()) changed_.Wait(&mu_);
      if (stopping_) return;
      call = std::move(queue_.front());
      queue_.pop_front();
    }
    call();
  }
}

IoWorkers::Batch::Batch(IoWorkers* workers)
    : workers_(workers), pending_(std::make_shared<Pending>()) {}

void IoWorkers::Batch::Add(std::function<void()> call) {
  {
    absl::MutexLock lock(&pending_->mu);
    ++pending_->running;
  }
  workers_->Run([pending = pending_, call = std::move(call)] {
    call();
    absl::MutexLock lock(&pending->mu);
    if (--pending->running == 0) pending->done.SignalAll();
  });
}

bool IoWorkers::Batch::WaitFor(absl::Duration limit) {
  Env* const env = workers_->env_;
  const absl::Duration end = env->MonotonicNow() + limit;
  absl::MutexLock lock(&pending_->mu);
  while (pending_->running > 0) {
    const absl::Duration left = end - env->MonotonicNow();
    if (left <= absl::ZeroDuration()) return false;
    pending_->done.WaitWithTimeout(&pending_->mu, left);
  }
  return true;
}

}  // namespace neffd
