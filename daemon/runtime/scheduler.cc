#include "daemon/runtime/scheduler.h"

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace neffd {

// The thread of an own_thread task: blocked until the clock thread says the
// task is due (an untimed wait, so no clock is involved).
class Scheduler::Worker {
 public:
  Worker(Env* env, std::function<void()> run)
      : thread_(env->StartThread("neffd-task", [this, run = std::move(run)] {
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
        })) {}

  ~Worker() {
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      wake_.Signal();
    }
    thread_.Join();
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
  EnvThread thread_;  // last: starts once the fields above exist
};

Scheduler::Scheduler(absl::Duration resolution, Env* env)
    : resolution_(resolution), env_(env) {}

Scheduler::~Scheduler() { Stop(); }

void Scheduler::Add(PeriodicTask task) {
  Scheduled scheduled;
  scheduled.task = std::move(task);
  tasks_.push_back(std::move(scheduled));
}

void Scheduler::Start() {
  const absl::Duration now = env_->MonotonicNow();
  for (Scheduled& s : tasks_) {
    s.next = s.task.first_at_start ? now : now + s.task.period;
    if (s.task.own_thread)
      s.worker = std::make_unique<Worker>(env_, s.task.run);
  }
  clock_ = env_->StartThread("neffd-clock", [this] { RunClock(); });
}

void Scheduler::RunClock() {
  for (;;) {
    env_->SleepFor(resolution_);
    if (stopping_.HasBeenNotified()) return;
    for (Scheduled& s : tasks_) {
      const absl::Duration now = env_->MonotonicNow();
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
  clock_.Join();
  for (Scheduled& s : tasks_) s.worker.reset();
}

}  // namespace neffd
