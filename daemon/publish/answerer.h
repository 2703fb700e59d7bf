// daemon/publish/answerer.h
//
// Answerer runs the publisher's answers to a key's parked waiters on one
// thread of its own (an Env's), started with it and kept for its life: a
// publish goes on to the shared store's copy and fsyncs while this host's
// waiters are answered, and no publish starts a thread. Jobs run one at a time,
// in the order they were given. Run() returns a Ticket; Ticket::Wait() returns
// once that job has run (the publisher waits before the lease ends).
//
// Thread-safe. The destructor runs every job already queued, then joins the
// thread.
#ifndef NEFFD_DAEMON_PUBLISH_ANSWERER_H_
#define NEFFD_DAEMON_PUBLISH_ANSWERER_H_

#include <deque>
#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "store/env.h"

namespace neffd {

class Answerer {
 public:
  // Says when one job has run. Default-constructed: no job; Wait returns.
  class Ticket {
   public:
    Ticket() = default;
    void Wait() const {
      if (done_ != nullptr) done_->WaitForNotification();
    }

   private:
    friend class Answerer;
    std::shared_ptr<absl::Notification> done_;
  };

  explicit Answerer(Env* env);
  ~Answerer();
  Answerer(const Answerer&) = delete;
  Answerer& operator=(const Answerer&) = delete;

  Ticket Run(std::function<void()> job);

 private:
  struct Job {
    std::function<void()> run;
    std::shared_ptr<absl::Notification> done;
  };
  void Loop();

  absl::Mutex mu_;
  absl::CondVar wake_;
  std::deque<Job> jobs_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  EnvThread thread_;  // last: starts once the fields above exist
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_PUBLISH_ANSWERER_H_
