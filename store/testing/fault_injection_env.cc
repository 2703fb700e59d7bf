#include "store/testing/fault_injection_env.h"

#include "absl/strings/match.h"

namespace neffd {

FaultInjectionEnv::~FaultInjectionEnv() { Clear(); }

FaultInjectionEnv::Rule FaultInjectionEnv::NewRule(
    Action action, std::optional<FsOp> op, absl::string_view path_contains) {
  Rule rule;
  rule.action = action;
  rule.op = op;
  rule.path_contains = std::string(path_contains);
  return rule;
}

void FaultInjectionEnv::AddRule(Rule rule) {
  absl::MutexLock lock(&mu_);
  rules_.push_back(std::move(rule));
}

void FaultInjectionEnv::Fail(std::optional<FsOp> op, int err,
                             absl::string_view path_contains, int64_t nth,
                             int64_t times) {
  Rule rule = NewRule(Action::kFail, op, path_contains);
  rule.err = err;
  rule.skip = nth - 1;
  rule.remaining = times;
  AddRule(std::move(rule));
}

void FaultInjectionEnv::Stall(std::optional<FsOp> op,
                              absl::string_view path_contains) {
  AddRule(NewRule(Action::kStall, op, path_contains));
}

void FaultInjectionEnv::Delay(std::optional<FsOp> op, absl::Duration delay,
                              absl::string_view path_contains) {
  Rule rule = NewRule(Action::kDelay, op, path_contains);
  rule.remaining = kEveryCall;
  rule.delay = delay;
  AddRule(std::move(rule));
}

bool FaultInjectionEnv::AwaitStalled(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  while (stalled_ == 0) {
    if (changed_.WaitWithDeadline(&mu_, deadline)) return stalled_ > 0;
  }
  return true;
}

void FaultInjectionEnv::Release() {
  absl::MutexLock lock(&mu_);
  ++releases_;
  changed_.SignalAll();
}

void FaultInjectionEnv::Clear() {
  absl::MutexLock lock(&mu_);
  rules_.clear();
  ++releases_;
  changed_.SignalAll();
}

int64_t FaultInjectionEnv::injected_failures() const {
  absl::MutexLock lock(&mu_);
  return injected_failures_;
}

bool FaultInjectionEnv::Matches(const Rule& rule, const FsCall& call) {
  if (rule.op.has_value() && *rule.op != call.op) return false;
  return rule.path_contains.empty() ||
         absl::StrContains(call.path, rule.path_contains) ||
         absl::StrContains(call.target, rule.path_contains);
}

absl::Status FaultInjectionEnv::BeforeCall(const FsCall& call) {
  absl::Duration delay;
  {
    absl::MutexLock lock(&mu_);
    for (Rule& rule : rules_) {
      if (rule.remaining == 0 || !Matches(rule, call)) continue;
      if (rule.skip > 0) {
        --rule.skip;
        continue;
      }
      if (rule.remaining != kEveryCall) --rule.remaining;
      if (rule.action == Action::kFail) {
        ++injected_failures_;
        return FsCallError(call, rule.err);
      }
      if (rule.action == Action::kDelay) {
        delay = rule.delay;
        break;
      }
      // kStall: wait for the next Release, whatever else happens meanwhile.
      const uint64_t release = releases_ + 1;
      ++stalled_;
      changed_.SignalAll();
      while (releases_ < release) changed_.Wait(&mu_);
      --stalled_;
      break;
    }
  }
  if (delay > absl::ZeroDuration()) absl::SleepFor(delay);
  return absl::OkStatus();
}

}  // namespace neffd
