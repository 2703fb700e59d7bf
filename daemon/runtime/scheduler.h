// daemon/runtime/scheduler.h
//
// Scheduler runs the daemon's periodic work (the lock table's tick, the
// systemd watchdog, access-time flushes, periodic gc, the metrics textfile)
// from one clock thread instead of a polling thread per job.
//
//   - The clock thread wakes every `resolution` with a relative sleep (the
//     Env's: its clock and threads are the Env's), not a timed wait on the
//     wall clock (docs/ARCHITECTURE.md, "Ticks use relative
//     sleeps"), and runs each task whose period has passed on the monotonic
//     clock. A period is therefore rounded up to whole wake-ups.
//   - A task runs on the clock thread unless it asks for a thread of its own
//     (`own_thread`): then the clock thread only wakes that thread, so a slow
//     run (gc walking the store, a textfile write waiting on fsync) never
//     delays the others. Such a task is never run twice at once; if it is
//     due again while running, it runs once more right after.
//   - A task first runs one period after Start(), or at the first wake-up
//     with `first_at_start`.
// Stop() returns once no task runs and none will run again: within one
// `resolution` plus the time the running tasks take to finish.
//
// Add() only before Start(); Start() and Stop() once each, from one thread.
// Tasks run on the scheduler's threads and must be thread-safe with respect
// to the rest of the program.
#ifndef NEFFD_DAEMON_RUNTIME_SCHEDULER_H_
#define NEFFD_DAEMON_RUNTIME_SCHEDULER_H_

#include <functional>
#include <memory>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "store/env.h"

namespace neffd {

struct PeriodicTask {
  absl::Duration period;
  std::function<void()> run;
  bool own_thread = false;
  bool first_at_start = false;
};

class Scheduler {
 public:
  explicit Scheduler(absl::Duration resolution, Env* env = Env::Default());
  ~Scheduler();  // Stop()s
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  void Add(PeriodicTask task);
  void Start();
  void Stop();

 private:
  class Worker;
  struct Scheduled {
    PeriodicTask task;
    absl::Duration next;             // on the monotonic clock
    std::unique_ptr<Worker> worker;  // own_thread tasks only
  };

  void RunClock();

  const absl::Duration resolution_;
  Env* const env_;
  std::vector<Scheduled> tasks_;
  absl::Notification stopping_;
  EnvThread clock_;
  bool stopped_ = false;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_RUNTIME_SCHEDULER_H_
