#include "daemon/etcd/etcd_locks.h"

#include <unistd.h>

#include <algorithm>
#include <limits>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/log/log.h"

namespace neffd::etcd {
namespace {

// How often the threads look at the stop flag while they sleep.
constexpr absl::Duration kTick = absl::Milliseconds(50);
constexpr int64_t kNotArmed = std::numeric_limits<int64_t>::max();

}  // namespace

class EtcdLocks::Impl {
 public:
  explicit Impl(EtcdLocksOptions options) : options_(std::move(options)) {}

  void StartThreads() {
    lease_thread_ =
        options_.env->StartThread("neffd-etcd-lease", [this] { LeaseLoop(); });
    watch_thread_ =
        options_.env->StartThread("neffd-etcd-watch", [this] { WatchLoop(); });
  }

  // Waits (at most retry_interval) for the watch to be up, so the first
  // waits are watched rather than polled. An etcd that does not answer
  // yet is not waited for longer: the lease files serve meanwhile.
  void AwaitWatch() {
    const absl::Duration until =
        options_.env->MonotonicNow() + options_.retry_interval;
    while (options_.env->MonotonicNow() < until) {
      {
        absl::MutexLock lock(&mu_);
        if (watch_ready_) return;
      }
      options_.env->SleepFor(absl::Milliseconds(1));
    }
  }

  void Stop() {
    stop_.Notify();
    {
      absl::MutexLock lock(&mu_);
      if (watch_ != nullptr) watch_->Cancel();
    }
    watch_thread_.Join();
    lease_thread_.Join();
    int64_t lease = 0;
    {
      absl::MutexLock lock(&mu_);
      lease = lease_id_;
    }
    // This daemon's keys go now, not a TTL later.
    if (lease != 0) (void)options_.client->RevokeLease(lease);
  }

  std::unique_ptr<ExternalLock> TryTake(const EntryKey& id,
                                        const std::string& lease_id,
                                        std::function<void()> wake,
                                        bool* watching);
  void Released(const std::string& key, int64_t create_revision);

  CoordinatorState state() const {
    absl::MutexLock lock(&mu_);
    CoordinatorState state = state_;
    state.lease_id = lease_id_;
    if (lease_id_ != 0) state.granted_ttl = granted_ttl_;
    state.watching = watch_ready_;
    return state;
  }

  absl::StatusOr<std::vector<EtcdHolder>> Holders() {
    absl::StatusOr<std::vector<std::pair<std::string, KeyState>>> keys =
        options_.client->List(options_.prefix);
    if (!keys.ok()) return keys.status();
    std::vector<EtcdHolder> holders;
    for (const auto& [key, kv] : *keys) {
      EtcdHolder holder;
      holder.canonical = key.substr(options_.prefix.size());
      std::vector<std::string> fields =
          absl::StrSplit(kv.value, ' ', absl::SkipWhitespace());
      if (!fields.empty()) holder.host = fields[0];
      if (fields.size() > 1) (void)absl::SimpleAtoi(fields[1], &holder.pid);
      holder.etcd_lease = kv.lease;
      holders.push_back(std::move(holder));
    }
    return holders;
  }

 private:
  // What a key held elsewhere waits for: a delete of its etcd key after
  // the revision the take read it at.
  struct Interest {
    std::function<void()> wake;
    int64_t after = kNotArmed;  // the take's read revision, once known
    int64_t deleted_at = 0;     // a delete seen before the take's read
  };
  struct Held {
    std::string value;
    int64_t create_revision = 0;
  };

  std::string KeyFor(const EntryKey& id) const {
    return options_.prefix + id.Canonical();
  }

  // Whether this take goes through etcd: yes while it answers, and once
  // per retry_interval while it does not.
  bool UseEtcd() {
    absl::MutexLock lock(&mu_);
    if (state_.etcd_healthy) return true;
    const absl::Duration now = options_.env->MonotonicNow();
    if (now < next_retry_) return false;
    next_retry_ = now + options_.retry_interval;
    return true;
  }

  void Failed(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    state_.last_error = std::string(status.message());
    next_retry_ = options_.env->MonotonicNow() + options_.retry_interval;
    if (!state_.etcd_healthy) return;
    state_.etcd_healthy = false;
    ++state_.fallbacks;
    log::Warning("etcd_unavailable",
                 {{"endpoints", options_.client->endpoints()},
                  {"error", status.message()},
                  {"now", "new keys use the filesystem protocol"}});
  }

  void Answered() {
    absl::MutexLock lock(&mu_);
    if (state_.etcd_healthy) return;
    state_.etcd_healthy = true;
    ++state_.recoveries;
    log::Warning("etcd_available", {{"endpoints", options_.client->endpoints()},
                                    {"now", "new keys use etcd"}});
  }

  // This daemon's etcd lease, granted on first use.
  absl::StatusOr<int64_t> Lease() {
    absl::MutexLock lease_lock(&grant_mu_);
    {
      absl::MutexLock lock(&mu_);
      if (lease_id_ != 0) return lease_id_;
    }
    absl::Duration ttl;
    absl::StatusOr<int64_t> granted =
        options_.client->GrantLease(options_.lease_ttl, &ttl);
    if (!granted.ok()) return granted.status();
    absl::MutexLock lock(&mu_);
    lease_id_ = *granted;
    // etcd grants at least its minimum: kept alive every third of what it
    // granted.
    granted_ttl_ = std::max(ttl, options_.lease_ttl);
    if (ttl > options_.lease_ttl && !warned_ttl_) {
      // Once: the hand-over after a crash is this long, not what was asked.
      warned_ttl_ = true;
      log::Warning("etcd_lease_ttl_raised",
                   {{"asked", absl::FormatDuration(options_.lease_ttl)},
                    {"granted", absl::FormatDuration(ttl)},
                    {"why",
                     "the minimum TTL of etcd (1.5 election timeouts); "
                     "docs/OPERATIONS.md says how to lower it"}});
    }
    return lease_id_;
  }

  std::unique_ptr<ExternalLock> Fallback(const EntryKey& id,
                                         const std::string& lease_id) {
    {
      absl::MutexLock lock(&mu_);
      ++state_.fallback_takes;
    }
    return options_.fallback->TryTake(id, lease_id);
  }

  // The watch stream's delete of `key` at `revision`.
  void OnDelete(const std::string& key, int64_t revision) {
    std::function<void()> wake;
    {
      absl::MutexLock lock(&mu_);
      auto it = interests_.find(key);
      if (it == interests_.end()) return;
      if (it->second.after == kNotArmed) {
        it->second.deleted_at = std::max(it->second.deleted_at, revision);
        return;
      }
      if (revision <= it->second.after) return;  // an older holder's
      wake = std::move(it->second.wake);
      interests_.erase(it);
      ++state_.watch_wakeups;
    }
    wake();
  }

  void WatchLoop();
  void LeaseLoop();
  // After this daemon's etcd lease expired (etcd away longer than its
  // TTL): a new lease, and the keys still held put back under it.
  void Regrant();
  void SleepUnlessStopped(absl::Duration duration) {
    const absl::Duration until = options_.env->MonotonicNow() + duration;
    while (!stop_.HasBeenNotified() && options_.env->MonotonicNow() < until) {
      options_.env->SleepFor(kTick);
    }
  }

  const EtcdLocksOptions options_;
  absl::Notification stop_;
  absl::Mutex grant_mu_;  // one GrantLease at a time
  mutable absl::Mutex mu_;
  CoordinatorState state_ ABSL_GUARDED_BY(mu_);
  int64_t lease_id_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration granted_ttl_ ABSL_GUARDED_BY(mu_);
  bool warned_ttl_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration next_retry_ ABSL_GUARDED_BY(mu_);
  bool watch_ready_ ABSL_GUARDED_BY(mu_) = false;
  PrefixWatch* watch_ ABSL_GUARDED_BY(mu_) = nullptr;
  absl::flat_hash_map<std::string, Interest> interests_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Held> held_ ABSL_GUARDED_BY(mu_);
  // Releases etcd did not hear of; retried by the lease thread.
  std::vector<std::pair<std::string, int64_t>> unreleased_ ABSL_GUARDED_BY(mu_);
  // Last: stopped before the fields they use go.
  EnvThread lease_thread_;
  EnvThread watch_thread_;
};

namespace {

// A key held through etcd: its etcd key and its fenced file locks.
class EtcdLock : public ExternalLock {
 public:
  EtcdLock(EtcdLocks::Impl* owner, std::string key, int64_t create_revision,
           std::unique_ptr<ExternalLock> files)
      : owner_(owner),
        key_(std::move(key)),
        create_revision_(create_revision),
        files_(std::move(files)) {}
  ~EtcdLock() override;
  void Refresh() override { files_->Refresh(); }
  bool StillHeld() override { return files_->StillHeld(); }

 private:
  EtcdLocks::Impl* const owner_;
  const std::string key_;
  const int64_t create_revision_;
  std::unique_ptr<ExternalLock> files_;
};

}  // namespace

EtcdLock::~EtcdLock() {
  // The file first: while the etcd key stands no etcd host takes the key,
  // and a host on the filesystem protocol may take it as soon as the file
  // goes.
  files_.reset();
  owner_->Released(key_, create_revision_);
}

std::unique_ptr<ExternalLock> EtcdLocks::Impl::TryTake(
    const EntryKey& id, const std::string& lease_id, std::function<void()> wake,
    bool* watching) {
  *watching = false;
  if (!UseEtcd()) return Fallback(id, lease_id);
  absl::StatusOr<int64_t> lease = Lease();
  if (!lease.ok()) {
    Failed(lease.status());
    return Fallback(id, lease_id);
  }
  const std::string key = KeyFor(id);
  const std::string value =
      absl::StrCat(options_.host_id, " ", getpid(), " ", lease_id);
  bool interested = false;
  {
    absl::MutexLock lock(&mu_);
    // Registered before the read, so a delete between the read and the
    // arming below is not lost.
    // (One waiting take per key at a time: the table's; an older interest
    // is of a wait that has gone.)
    if (watch_ready_ && wake != nullptr) {
      interests_[key] = Interest{std::move(wake)};
      interested = true;
    }
  }
  // A read first: a key held elsewhere then costs etcd no write (a Txn
  // goes through Raft even when its compare fails), so H hosts waiting on
  // one key make one write between them, not H.
  int64_t revision = 0;
  absl::StatusOr<std::optional<KeyState>> holder =
      options_.client->Get(key, &revision);
  absl::StatusOr<CreateResult> created = CreateResult{};
  if (holder.ok() && !holder->has_value()) {
    created = options_.client->CreateIfAbsent(key, value, *lease);
    if (created.ok()) revision = created->revision;
    // A Txn retried after its answer was lost finds its own put.
    if (created.ok() && !created->created && created->existing.has_value() &&
        created->existing->value == value) {
      created->created = true;
      revision = created->existing->create_revision;
    }
  }
  const absl::Status status = holder.ok() ? created.status() : holder.status();
  const bool taken = status.ok() && created->created;
  if (!status.ok() || taken) {
    absl::MutexLock lock(&mu_);
    if (interested) interests_.erase(key);
  }
  if (!status.ok()) {
    Failed(status);
    return Fallback(id, lease_id);
  }
  Answered();
  if (!taken) {
    if (!interested) return nullptr;  // polled
    std::function<void()> wake_now;
    {
      absl::MutexLock lock(&mu_);
      auto it = interests_.find(key);
      if (it == interests_.end()) return nullptr;  // the watch broke: polled
      if (it->second.deleted_at > revision) {
        wake_now = std::move(it->second.wake);
        interests_.erase(it);
        ++state_.watch_wakeups;
      } else {
        it->second.after = revision;
      }
    }
    *watching = true;
    if (wake_now) wake_now();
    return nullptr;
  }
  std::unique_ptr<ExternalLock> files = options_.fenced->TryTake(id, lease_id);
  if (files == nullptr) {
    // A daemon-less process here, or a host on the filesystem protocol,
    // holds it: give the etcd key back and poll, as that protocol does.
    Released(key, revision);
    return nullptr;
  }
  {
    absl::MutexLock lock(&mu_);
    held_[key] = Held{value, revision};
    ++state_.etcd_takes;
  }
  return std::make_unique<EtcdLock>(this, key, revision, std::move(files));
}

void EtcdLocks::Impl::Released(const std::string& key,
                               int64_t create_revision) {
  {
    absl::MutexLock lock(&mu_);
    auto it = held_.find(key);
    if (it != held_.end()) {
      // Put back under a new lease since (Regrant): that incarnation goes.
      create_revision = it->second.create_revision;
      held_.erase(it);
    }
    // etcd is failing: the lease thread deletes the key once etcd answers
    // again (or its lease expires, or Stop revokes it), so a release, and a
    // shutdown with many keys held, waits for no call timeout.
    if (!state_.etcd_healthy) {
      unreleased_.emplace_back(key, create_revision);
      return;
    }
  }
  absl::StatusOr<bool> deleted =
      options_.client->DeleteIfCreatedAt(key, create_revision);
  if (deleted.ok()) return;
  Failed(deleted.status());
  absl::MutexLock lock(&mu_);
  unreleased_.emplace_back(key, create_revision);
}

void EtcdLocks::Impl::WatchLoop() {
  int64_t from = 0;
  while (!stop_.HasBeenNotified()) {
    std::unique_ptr<PrefixWatch> watch = options_.client->WatchPrefix(
        options_.prefix, from, /*deletes_only=*/true);
    {
      absl::MutexLock lock(&mu_);
      if (stop_.HasBeenNotified()) break;
      watch_ = watch.get();
    }
    absl::Status ended = watch->Run(
        [this](int64_t) {
          absl::MutexLock lock(&mu_);
          watch_ready_ = true;
        },
        [this](const Change& change) { OnDelete(change.key, change.revision); },
        &from);
    // Every wait this watch would have woken looks again now: by etcd if
    // it answers, else by the filesystem protocol.
    absl::flat_hash_map<std::string, Interest> orphans;
    {
      absl::MutexLock lock(&mu_);
      watch_ = nullptr;
      watch_ready_ = false;
      orphans.swap(interests_);
      if (!stop_.HasBeenNotified()) {
        ++state_.watch_restarts;
        state_.last_error = std::string(ended.message());
      }
    }
    for (auto& [key, interest] : orphans) interest.wake();
    if (absl::IsOutOfRange(ended)) from = 0;  // compacted: from now
    if (!stop_.HasBeenNotified()) SleepUnlessStopped(options_.retry_interval);
  }
}

void EtcdLocks::Impl::LeaseLoop() {
  while (!stop_.HasBeenNotified()) {
    absl::Duration period;
    {
      absl::MutexLock lock(&mu_);
      period = std::max(granted_ttl_, options_.lease_ttl) / 3;
    }
    SleepUnlessStopped(period);
    if (stop_.HasBeenNotified()) return;
    int64_t lease = 0;
    std::vector<std::pair<std::string, int64_t>> unreleased;
    {
      absl::MutexLock lock(&mu_);
      lease = lease_id_;
      unreleased.swap(unreleased_);
    }
    if (lease != 0) {
      absl::Status kept = options_.client->KeepAlive(lease);
      if (absl::IsNotFound(kept)) {
        Regrant();
      } else if (!kept.ok()) {
        Failed(kept);
      } else {
        Answered();
      }
    }
    for (const auto& [key, create_revision] : unreleased) {
      Released(key, create_revision);
    }
  }
}

void EtcdLocks::Impl::Regrant() {
  absl::flat_hash_map<std::string, Held> held;
  {
    absl::MutexLock lock(&mu_);
    lease_id_ = 0;
    ++state_.lease_losses;
    held = held_;
  }
  log::Warning("etcd_lease_lost",
               {{"endpoints", options_.client->endpoints()},
                {"held", static_cast<int64_t>(held.size())}});
  absl::StatusOr<int64_t> lease = Lease();
  if (!lease.ok()) {
    Failed(lease.status());
    return;
  }
  Answered();
  for (const auto& [key, was] : held) {
    // Another host may have taken the key meanwhile; it then breaks this
    // daemon's lease file, and this holder's publish is refused
    // (ExternalLock::StillHeld).
    absl::StatusOr<CreateResult> again =
        options_.client->CreateIfAbsent(key, was.value, *lease);
    if (!again.ok() || !again->created) continue;
    absl::MutexLock lock(&mu_);
    auto it = held_.find(key);
    if (it != held_.end()) it->second.create_revision = again->revision;
  }
}

EtcdLocks::EtcdLocks(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

EtcdLocks::~EtcdLocks() { impl_->Stop(); }

absl::StatusOr<std::unique_ptr<EtcdLocks>> EtcdLocks::Start(
    EtcdLocksOptions options) {
  if (options.client == nullptr || options.fenced == nullptr ||
      options.fallback == nullptr) {
    return absl::InvalidArgumentError(
        "etcd locks: a client and both file locks are required");
  }
  if (options.lease_ttl <= absl::ZeroDuration() ||
      options.retry_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "etcd locks: the lease TTL and retry interval must be positive");
  }
  auto impl = std::make_unique<Impl>(std::move(options));
  impl->StartThreads();
  impl->AwaitWatch();
  return std::unique_ptr<EtcdLocks>(new EtcdLocks(std::move(impl)));
}

std::unique_ptr<ExternalLock> EtcdLocks::TryTake(const EntryKey& id,
                                                 const std::string& lease_id) {
  bool watching = false;
  return impl_->TryTake(id, lease_id, nullptr, &watching);
}

std::unique_ptr<ExternalLock> EtcdLocks::TryTakeOrWatch(
    const EntryKey& id, const std::string& lease_id, std::function<void()> wake,
    bool* watching) {
  return impl_->TryTake(id, lease_id, std::move(wake), watching);
}

CoordinatorState EtcdLocks::state() const { return impl_->state(); }

absl::StatusOr<std::vector<EtcdHolder>> EtcdLocks::Holders() {
  return impl_->Holders();
}

}  // namespace neffd::etcd
