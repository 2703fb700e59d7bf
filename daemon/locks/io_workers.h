// daemon/locks/io_workers.h
//
// IoWorkers runs the LockTable's shared-filesystem calls (taking, refreshing
// and releasing lease files, looking for published entries) on a fixed number
// of threads, so a call that stalls on a slow or hung FSx server holds one
// worker and never the table's mutex, the tick, or another key's lease. Work
// beyond the workers queues; the queue is bounded by the number of keys with
// work due (the table never queues a second call for a key whose first is
// still running).
//
// The workers are `env`'s threads; Batch::WaitFor measures on its clock.
// Thread-safe. The destructor waits for the running calls and drops the
// queued ones.
#ifndef NEFFD_DAEMON_LOCKS_IO_WORKERS_H_
#define NEFFD_DAEMON_LOCKS_IO_WORKERS_H_

#include <deque>
#include <functional>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/env.h"

namespace neffd {

class IoWorkers {
 public:
  IoWorkers(int threads, Env* env);
  ~IoWorkers();
  IoWorkers(const IoWorkers&) = delete;
  IoWorkers& operator=(const IoWorkers&) = delete;

  // Runs `call` on a worker.
  void Run(std::function<void()> call);

  // A set of calls whose caller may wait for them, for a while.
  class Batch {
   public:
    explicit Batch(IoWorkers* workers);
    void Add(std::function<void()> call);
    // True if every call added so far finished within `limit`; the rest go
    // on running and report their results themselves.
    bool WaitFor(absl::Duration limit);

   private:
    struct Pending {
      absl::Mutex mu;
      absl::CondVar done;
      int running ABSL_GUARDED_BY(mu) = 0;
    };
    IoWorkers* const workers_;
    // Shared with the calls, which may outlive the batch.
    const std::shared_ptr<Pending> pending_;
  };

 private:
  void Work();

  absl::Mutex mu_;
  // Explicit waits, not Mutex::Await: absl evaluates an Await condition on
  // the unlocking thread, an ordering TSan cannot see (store/digest.cc).
  absl::CondVar changed_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Env* const env_;
  std::vector<EnvThread> threads_;  // last: start once the fields exist
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_LOCKS_IO_WORKERS_H_
