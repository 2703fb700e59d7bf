// store/wake_notice.h
//
// A wake notice: one file on the host's local disk that any number of
// processes wait on and one writer answers, waking them all with a single
// futex call. The daemon parks a key's waiting ranks on one (the Lock answer
// PARKED, proto/neffd/v1/neffd.proto) instead of holding one gRPC call per
// rank: answering 31 parked calls costs the daemon a gRPC write each and
// every woken rank a gRPC read, where the kernel wakes futex waiters in one
// call, as it wakes flock(2) waiters (docs/ARCHITECTURE.md, "Lock").
//
// The file: its first page holds a 32-bit state word (0 waiting, 1
// answered; the futex) and the answer's size; the answer's bytes follow the
// page. The writer holds an exclusive flock(2) on it from creation until it
// closes it, so a waiter can tell a writer that died (the kernel released
// the lock) from one still working. Writers create notices in a directory
// only they may write; waiters only read them.
//
// Thread-safe: Answer may race with itself and with the destructor's.
#ifndef NEFFD_STORE_WAKE_NOTICE_H_
#define NEFFD_STORE_WAKE_NOTICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "store/env.h"
#include "store/unique_fd.h"

namespace neffd {

class WakeNotice {
 public:
  // Creates `path` (which must not exist) with `mode`, locked and waiting.
  static absl::StatusOr<std::unique_ptr<WakeNotice>> Create(
      Env* env, const std::string& path, mode_t mode);
  // Unlinks the file, then wakes its waiters with an empty answer ("ask
  // again") if nothing was answered.
  ~WakeNotice();
  WakeNotice(const WakeNotice&) = delete;
  WakeNotice& operator=(const WakeNotice&) = delete;

  // Writes `answer` and wakes every waiter. The first answer wins: false
  // (and nothing written) if the notice was answered already. A failed
  // write wakes the waiters with an empty answer. The file stays (a late
  // reader reads the answer) but this object lets go of it: no descriptor
  // or mapping is held from then on.
  bool Answer(absl::string_view answer);

  bool answered() const { return answered_.load(); }
  const std::string& path() const { return path_; }

 private:
  WakeNotice(Env* env, std::string path, UniqueFd fd, void* page);

  Env* const env_;
  const std::string path_;
  UniqueFd fd_;
  void* page_;  // null once answered
  std::atomic<bool> answered_{false};
};

// How a wait on a notice ended.
struct WakeWait {
  enum class End {
    kAnswered,   // `answer` holds the writer's answer (empty: ask again)
    kAbandoned,  // the writer is gone without answering
    kTimedOut,   // `deadline` passed first
  };
  End end = End::kTimedOut;
  std::string answer;
};

// Waits on the notice at `path` until it is answered, its writer is gone, or
// `env->MonotonicNow()` reaches `deadline`. Checks for a dead writer every
// `probe_every`. NotFound if the notice is gone (answered and removed
// already: ask again); another error if it cannot be opened or is not a
// notice.
absl::StatusOr<WakeWait> WaitForNotice(Env* env, const std::string& path,
                                       absl::Duration deadline,
                                       absl::Duration probe_every);

}  // namespace neffd

#endif  // NEFFD_STORE_WAKE_NOTICE_H_
