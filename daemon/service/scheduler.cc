#include "daemon/service/scheduler.h"

#include <chrono>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"

namespace neffd {
namespace {

absl::Duration MonotonicNow() {
  return absl::FromChrono(std::chrono::steady_clock::now().time_since_epoch());
}

}  // namespace

// The thread of an own_thread task: blocked until the clock thread says the
// task is due (an untimed wait, so no clock is involved).
class Scheduler::Worker {
 public:
  explicit Worker(std::function<void()> run)
      : thread_([this, run = std::move(run)] {
          for (;;) {
            {
              absl::MutexLock lock(&mu_);
              // A CondVar loop, not Await(Condition): Await may evaluate the
              // condition inside Debian's uninstrumented absl, where TSan
              // cannot see that mu_ is held, and reports a race.
              while (!DueOrStopping()) wake_.Wait(&mu_);
              if (stopping_) return;
              due_ = false;
            }
            run();
          }
        }) {}

  ~Worker() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      wake_.Signal();
    }
    thread_.join();
  }

  void Wake() {
    absl::MutexLock lock(&mu_);
    due_ = true;
    wake_.Signal();
  }

 private:
  bool DueOrStopping() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return due_ || stopping_;
  }

  absl::Mutex mu_;
  absl::CondVar wake_;
  bool due_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts once the fields above exist
};

Scheduler::Scheduler(absl::Duration resolution) : resolution_(resolution) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Add(PeriodicTask task) {
  Scheduled scheduled;
  scheduled.task = std::move(task);
  tasks_.push_back(std::move(scheduled));
}

void Scheduler::Start() {
  const absl::Duration now = MonotonicNow();
  for (Scheduled& s : tasks_) {
    s.next = s.task.first_at_start ? now : now + s.task.period;
    if (s.task.own_thread) s.worker = std::make_unique<Worker>(s.task.run);
  }
  clock_ = std::thread([this] { RunClock(); });
}

void Scheduler::RunClock() {
  for (;;) {
    absl::SleepFor(resolution_);
    if (stopping_.HasBeenNotified()) return;
    for (Scheduled& s : tasks_) {
      const absl::Duration now = MonotonicNow();
      if (now < s.next) continue;
      s.next = now + s.task.period;
      if (s.worker != nullptr) {
        s.worker->Wake();
      } else {
        s.task.run();
      }
    }
  }
}

void Scheduler::Stop() {
  if (stopped_) return;
  stopped_ = true;
  stopping_.Notify();
  if (clock_.joinable()) clock_.join();
  for (Scheduled& s : tasks_) s.worker.reset();
}

}  // namespace neffd
