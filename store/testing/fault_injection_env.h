// store/testing/fault_injection_env.h
//
// FaultInjectionEnv wraps another Env (usually Env::Default()) and makes
// chosen filesystem calls misbehave, for tests of what the store, the tier
// and the locks do when the filesystem does:
//
//   - Fail: the nth matching call (and optionally the ones after it) fails
//     with a chosen errno (ENOSPC, EIO, ...) without reaching the filesystem,
//     exactly as the real call would report it (FsCallError).
//   - Stall: the next matching call blocks before it reaches the filesystem
//     until the test releases it, like a hung call to a shared filesystem;
//     every other call, on every other thread, goes on.
//   - Delay: every matching call first sleeps, like a slow filesystem.
//
// A call matches a rule by its kind (FsOp; nullopt: any) and, if the rule
// has one, a substring of the path it names (for rename and link, of either
// name). Rules apply in the order they were added; the first that acts on a
// call decides it. The clock is the wrapped Env's.
//
// Thread-safe.
#ifndef NEFFD_STORE_TESTING_FAULT_INJECTION_ENV_H_
#define NEFFD_STORE_TESTING_FAULT_INJECTION_ENV_H_

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/env.h"

namespace neffd {

class FaultInjectionEnv : public EnvWrapper {
 public:
  static constexpr int64_t kEveryCall = std::numeric_limits<int64_t>::max();

  explicit FaultInjectionEnv(Env* target = Env::Default())
      : EnvWrapper(target) {}
  // Releases any stalled call first.
  ~FaultInjectionEnv() override;

  // Makes the `nth` matching call from now on (1: the next one), and the
  // `times` - 1 matching calls after it, fail with `err`.
  void Fail(std::optional<FsOp> op, int err, absl::string_view path_contains,
            int64_t nth = 1, int64_t times = 1);
  // Every matching call from now on fails with `err`.
  void FailEvery(std::optional<FsOp> op, int err,
                 absl::string_view path_contains = "") {
    Fail(op, err, path_contains, 1, kEveryCall);
  }

  // The next matching call blocks until Release() (or the destructor).
  void Stall(std::optional<FsOp> op, absl::string_view path_contains = "");
  // True once a call is blocked by Stall; false if none is after `timeout`.
  bool AwaitStalled(absl::Duration timeout);
  // Lets every stalled call go on (to the filesystem).
  void Release();

  // Every matching call from now on first sleeps `delay` (real time).
  void Delay(std::optional<FsOp> op, absl::Duration delay,
             absl::string_view path_contains = "");

  // Drops every rule and releases stalled calls.
  void Clear();

  // Calls that a rule failed so far.
  int64_t injected_failures() const;

 protected:
  absl::Status BeforeCall(const FsCall& call) override;

 private:
  enum class Action { kFail, kStall, kDelay };
  struct Rule {
    Action action = Action::kFail;
    std::optional<FsOp> op;
    std::string path_contains;
    int err = 0;            // kFail
    int64_t skip = 0;       // matching calls to let through first
    int64_t remaining = 1;  // calls still to act on
    absl::Duration delay;   // kDelay
  };

  static Rule NewRule(Action action, std::optional<FsOp> op,
                      absl::string_view path_contains);
  static bool Matches(const Rule& rule, const FsCall& call);
  void AddRule(Rule rule);

  mutable absl::Mutex mu_;
  // Explicit waits, not Mutex::Await (see store/digest.cc's WritePipeline).
  absl::CondVar changed_;
  std::vector<Rule> rules_ ABSL_GUARDED_BY(mu_);
  int64_t stalled_ ABSL_GUARDED_BY(mu_) = 0;  // calls blocked now
  uint64_t releases_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t injected_failures_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace neffd

#endif  // NEFFD_STORE_TESTING_FAULT_INJECTION_ENV_H_
