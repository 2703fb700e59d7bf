#include "daemon/publish/answerer.h"

#include <utility>

namespace neffd {

Answerer::Answerer(Env* env)
    : thread_(env->StartThread("neffd-answerer", [this] { Loop(); })) {}

Answerer::~Answerer() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  thread_.Join();
}

Answerer::Ticket Answerer::Run(std::function<void()> job) {
  Ticket ticket;
  ticket.done_ = std::make_shared<absl::Notification>();
  absl::MutexLock lock(&mu_);
  jobs_.push_back(Job{std::move(job), ticket.done_});
  wake_.Signal();
  return ticket;
}

void Answerer::Loop() {
  for (;;) {
    Job job;
    {
      absl::MutexLock lock(&mu_);
      // Explicit waits, not Mutex::Await (store/digest.cc says why).
      while (jobs_.empty() && !stopping_) wake_.Wait(&mu_);
      if (jobs_.empty()) return;  // stopping, and every job has run
      job = std::move(jobs_.front());
      jobs_.pop_front();
    }
    job.run();
    job.done->Notify();
  }
}

}  // namespace neffd
