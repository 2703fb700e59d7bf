#include "daemon/locks/io_workers.h"

#include <utility>

#include "absl/time/clock.h"

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
    changed_.SignalAll();
  }
  for (std::thread& t : threads_) t.join();
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
  const absl::Time deadline = absl::Now() + limit;
  absl::MutexLock lock(&pending_->mu);
  while (pending_->running > 0) {
    if (pending_->done.WaitWithDeadline(&pending_->mu, deadline)) {
      return pending_->running == 0;  // timed out
    }
  }
  return true;
}

}  // namespace neffd
