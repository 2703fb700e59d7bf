#include "daemon/locks/io_workers.h"

#include <utility>

namespace neffd {

IoWorkers::IoWorkers(int threads) {
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this] { Work(); });
}

IoWorkers::~IoWorkers() {
  std::deque<std::function<void()>> dropped;
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  for (std::thread& t : threads_) t.join();
}

void IoWorkers::Run(std::function<void()> call) {
  absl::MutexLock lock(&mu_);
  if (!stopping_) queue_.push_back(std::move(call));
}

void IoWorkers::Work() {
  for (;;) {
    std::function<void()> call;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](IoWorkers* w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(w->mu_) {
            return w->stopping_ || !w->queue_.empty();
          },
          this));
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
    --pending->running;
  });
}

bool IoWorkers::Batch::WaitFor(absl::Duration limit) {
  absl::MutexLock lock(&pending_->mu);
  return pending_->mu.AwaitWithTimeout(
      absl::Condition(
          +[](Pending* p)
               ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu) { return p->running == 0; },
          pending_.get()),
      limit);
}

}  // namespace neffd
