// daemon/locks/lock_table.h
//
// LockTable decides, for this host, who compiles each entry. At most one lease
// per key is out at a time; while it is, the table also keeps the key's
// ExternalLock (daemon/locks/file_locks.h: the local flock that daemon-less
// processes respect, and the cross-host lease file on the shared store). A
// key held elsewhere is polled every poll_interval: a published entry answers
// its waiters kReady, a released or stale hold is taken and granted.
//
// Waiters are parked as callbacks, never as threads: each parked request's
// callback runs exactly once, outside the table's mutex, with one of
//   kGranted   the waiter now holds a new lease (handed over on abandon,
//              revocation or holder death);
//   kReady     the holder published; the event carries the entry;
//   kFailed    the holder recorded a compile failure; the event carries it;
//   kTimedOut  the waiter's deadline passed;
//   kShutdown  the daemon is stopping or draining; retry later;
// unless Cancel() removed it first. Acquire answers at once, without parking,
// kTooMany when the holder (host, pid) already holds max_leases_per_holder
// leases, and kOverloaded when the request would park but max_waiters are
// parked already (across all keys and clients). A lease is revoked when its
// holder misses its TTL, if Liveness can observe the holder as soon as the
// holder's process is gone, and when the service says the holder's
// connection broke (HolderGone). A lease pinned by BeginPublish is never
// revoked.
//
// No shared-filesystem call is ever made under the table's mutex: external
// holds are taken, refreshed and released, and published entries looked for,
// outside it, each key by one call at a time. A lease that ends with waiters
// parked hands its external hold to the next waiter without any I/O. Tick
// runs its calls on `io_threads` workers (daemon/locks/io_workers.h) and
// waits for them at most `tick_io_wait`: a call that stalls on the shared
// filesystem delays its own key only, never the tick, another key's lease
// refresh or an RPC.
//
// Thread-safe. Tick() must be called periodically (the daemon does it every
// 100 ms); timing granularity of expiry and timeouts is the tick interval.
#ifndef NEFFD_DAEMON_LOCKS_LOCK_TABLE_H_
#define NEFFD_DAEMON_LOCKS_LOCK_TABLE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/locks/io_workers.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "store/entry_id.h"
#include "store/env.h"
#include "store/file_util.h"
#include "store/liveness.h"

namespace neffd {

// What a lease holds outside this process (a lock file, a lease file on the
// shared store). Released when destroyed. Implementations are thread-safe.
class ExternalLock {
 public:
  virtual ~ExternalLock() = default;
  // Keeps a time-limited hold alive; the table calls it every TTL/3.
  virtual void Refresh() {}
  // False once another process or host has taken the hold away.
  virtual bool StillHeld() { return true; }
};

class ExternalLocks {
 public:
  virtual ~ExternalLocks() = default;
  // Takes every hold for `id`, or returns nullptr if another process or host
  // has one now. May do I/O.
  virtual std::unique_ptr<ExternalLock> TryTake(
      const EntryKey& id, const std::string& lease_id) = 0;
  // TryTake for a table that can be told when to look again. When the take
  // fails and these locks can watch the hold that stopped it (etcd,
  // daemon/etcd/etcd_locks.h), they set `*watching` and call `wake` once,
  // from any thread (even before this returns), when that hold may have
  // ended: the table then does not poll the key. Otherwise `*watching` is
  // false and the table polls every poll_interval.
  virtual std::unique_ptr<ExternalLock> TryTakeOrWatch(
      const EntryKey& id, const std::string& lease_id,
      std::function<void()> wake, bool* watching) {
    (void)wake;
    *watching = false;
    return TryTake(id, lease_id);
  }
};

enum class LockOutcome {
  kGranted,
  kBusy,
  kReady,
  kFailed,
  kTimedOut,
  kShutdown,
  kTooMany,
  kOverloaded
};

struct LockEvent {
  LockOutcome outcome = LockOutcome::kBusy;
  std::string lease_id;  // kGranted
  v1::Entry entry;       // kReady
  v1::Failure failure;   // kFailed
};

using LockCallback = std::function<void(LockEvent)>;

struct LockTableOptions {
  absl::Duration lease_ttl = absl::Seconds(30);
  // How often a key held elsewhere (another process or host) is re-checked:
  // first for a published entry, then for a free or stale hold.
  absl::Duration poll_interval = absl::Seconds(1);
  // Its clock (Now() only); not owned.
  Env* env = Env::Default();
  Liveness* liveness = nullptr;             // not owned; null: TTL only
  ExternalLocks* external_locks = nullptr;  // not owned; null: memory only
  // Looks for a published entry for a key held elsewhere; called without the
  // table's mutex. Null: never.
  std::function<std::optional<v1::Entry>(const EntryKey&)> probe_entry;
  // Leases one holder (host, pid) may hold at once; 0: no limit. The pid is
  // what the client says, so this bounds a runaway client, not a hostile one.
  int max_leases_per_holder = 0;
  // Waiters parked at once across all keys; 0: no limit. Each parked waiter
  // costs its memory and a gRPC call (or a share of a wake notice), so this
  // bounds what a storm of ranks (or a runaway client) can make the daemon
  // hold.
  int max_waiters = 0;
  // Threads for Tick's shared-filesystem calls, and how long a Tick waits for
  // them before it leaves the stragglers to finish on their own.
  int io_threads = 8;
  absl::Duration tick_io_wait = absl::Milliseconds(500);
};

class LockTable {
 public:
  using WaiterId = uint64_t;

  struct Counts {
    uint64_t leases_held = 0;
    uint64_t waiters = 0;
    uint64_t grants = 0;
    uint64_t waits = 0;
    uint64_t timeouts = 0;
    uint64_t revoked = 0;
  };

  explicit LockTable(LockTableOptions options);
  ~LockTable();

  // Grants at once if the key is free, else reports kBusy (wait=false) or
  // parks `done` until `deadline`. `done` may run before Acquire returns.
  // Returns the waiter's id for Cancel(), or 0 if `done` has already run.
  WaiterId Acquire(const EntryKey& id, const HolderInfo& holder, bool wait,
                   absl::Time deadline, LockCallback done);

  // Removes a parked waiter. True if it was still parked (its callback will
  // not run); false if its callback has run or is running.
  bool Cancel(WaiterId waiter);

  // Extends the lease by the TTL. FailedPrecondition if it is not held.
  absl::Status KeepAlive(const std::string& lease_id);

  // Checks that `lease_id` holds `id` (and still holds its external locks)
  // and pins it against revocation until FinishPublish. FailedPrecondition
  // (unknown, expired or revoked lease, a lease for another key, or a hold
  // another host broke) otherwise.
  absl::Status BeginPublish(const std::string& lease_id, const EntryKey& id);
  // Ends a publish. With `entry`, the key is resolved: the lease ends and
  // every waiter gets kReady. Without, the pin is dropped and the holder keeps
  // its lease (it may retry the publish).
  void FinishPublish(const std::string& lease_id, const v1::Entry* entry);
  // During a publish (between BeginPublish and FinishPublish): answers the
  // waiters parked now with kReady and `entry` (a verified copy on this
  // host) without ending the lease, so they need not wait for the shared
  // store to make the entry durable. Later waiters park until FinishPublish.
  // Returns how many were answered.
  size_t AnswerWaiters(const std::string& lease_id, const v1::Entry& entry);
  // How many waiters are parked behind `lease_id`'s key now (0 for a lease
  // not held).
  size_t Waiting(const std::string& lease_id);

  // The holder's connection broke (its process is gone): the lease ends at
  // once, as if abandoned, unless a publish pinned it (the publish decides).
  // Counted as a revocation. No-op for a lease that is not held.
  void HolderGone(const std::string& lease_id);

  // Gives the lease back. Without `failure` (abandoned) the next waiter is
  // granted; with it every waiter gets kFailed.
  absl::Status Release(const std::string& lease_id, const EntryKey& id,
                       const v1::Failure* failure);

  // Revokes expired or dead holders, refreshes external holds, times out
  // waiters, polls keys held elsewhere.
  void Tick();

  // Answers every waiter kShutdown and refuses new requests the same way,
  // for good. Current leases may still be kept alive, published, released.
  void Shutdown();
  // The same until Undrain() (operator maintenance).
  void Drain();
  void Undrain();
  bool draining() const;

  // One lease out on this host, for operators.
  struct LeaseView {
    EntryKey id;
    HolderInfo holder;
    absl::Time granted;
    absl::Time expires;
    size_t waiters = 0;
    bool publishing = false;
  };
  std::vector<LeaseView> Leases() const;

  // True while a lease on `id` is out on this host.
  bool Held(const EntryKey& id) const;

  Counts counts() const;
  absl::Duration lease_ttl() const { return options_.lease_ttl; }

 private:
  struct Waiter {
    WaiterId id;
    HolderInfo holder;
    absl::Time deadline;
    LockCallback done;
    bool wait = true;  // false: answered kBusy if the key cannot be taken
    // Found the key free: not parked (counted as a wait) unless the take
    // fails.
    bool trying = false;
  };
  struct Lease {
    std::string lease_id;
    HolderInfo holder;
    std::optional<uint64_t> liveness_token;
    absl::Time expires;
    absl::Time refreshed;
    absl::Time granted;
    bool publishing = false;
    bool refreshing = false;  // a Refresh is running outside the mutex
    std::shared_ptr<ExternalLock> external;
  };
  struct Slot {
    explicit Slot(EntryKey k) : id(std::move(k)) {}
    EntryKey id;
    std::optional<Lease> lease;
    std::deque<Waiter> waiters;
    // While the key is held elsewhere: when to look again (never, while
    // the external locks watch the holder).
    absl::Time next_poll = absl::InfinitePast();
    // The external locks said the holder may be gone since the last take
    // began.
    bool woken = false;
    // An external hold is being taken or released outside the mutex; no
    // other attempt starts until it reports back.
    bool io_busy = false;
    bool probing = false;  // probe_entry is running outside the mutex
    // The external hold of a lease that just ended, for the next waiter.
    std::shared_ptr<ExternalLock> handover;
  };
  // What is done once the mutex is released: callbacks to run, external
  // holds to release, keys whose holds to take.
  struct Outside {
    std::vector<std::pair<LockCallback, LockEvent>> callbacks;
    std::vector<std::pair<EntryKey, std::shared_ptr<ExternalLock>>> releases;
    std::vector<EntryKey> takes;
    std::vector<EntryKey> probes;
  };
  // What a wake from the external locks reaches: the table until it is
  // destroyed, then nothing (the locks may outlive it).
  struct WakeTarget {
    absl::Mutex mu;
    LockTable* table ABSL_GUARDED_BY(mu);
  };

  // Makes `waiter` the holder with `external` (may be null).
  void Grant(Slot& slot, Waiter waiter, std::string lease_id,
             std::shared_ptr<ExternalLock> external, Outside& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves a free slot on: hands a spare hold to the first waiter, releases
  // a spare hold nobody waits for, or schedules a take for waiters; drops
  // the slot when nothing is left.
  void Settle(Slot& slot, absl::Time now, Outside& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the slot's lease; its external hold becomes the slot's handover if
  // `keep_external`, else it is released.
  void EndLease(Slot& slot, bool keep_external, Outside& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the slot's lease and answers all its waiters with `event`.
  void ResolveAll(Slot& slot, const LockEvent& event, Outside& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Answers waiter `w` of `slot` with `outcome` and removes it; the next
  // waiter.
  std::deque<Waiter>::iterator AnswerAndDrop(Slot& slot,
                                             std::deque<Waiter>::iterator w,
                                             LockOutcome outcome, Outside& out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leases out to `holder` (host, pid).
  int HeldBy(const HolderInfo& holder) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool Idle(const Slot& slot) const;
  void DropIfIdle(const std::string& canonical)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The slot `lease_id` holds, checked against `id` if given.
  absl::StatusOr<Slot*> FindLease(const std::string& lease_id,
                                  const EntryKey* id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Slot* FindSlot(const EntryKey& id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Without the mutex: carries `out` out, here or (with `batch`) on the
  // workers.
  void Finish(Outside& out, IoWorkers::Batch* batch = nullptr)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Takes `id`'s external hold and grants it to the first waiter.
  void Take(const EntryKey& id) ABSL_LOCKS_EXCLUDED(mu_);
  void Release(const EntryKey& id, std::shared_ptr<ExternalLock> external)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Looks for a published entry for `id` and answers its waiters with it.
  void Probe(const EntryKey& id) ABSL_LOCKS_EXCLUDED(mu_);
  // The external locks' word that `id`'s holder elsewhere may be gone:
  // look for the entry, then take the key, now.
  void Wake(const EntryKey& id) ABSL_LOCKS_EXCLUDED(mu_);

  const LockTableOptions options_;
  mutable absl::Mutex mu_;
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;  // draining, too
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;        // Shutdown(): for good
  WaiterId next_waiter_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<std::string, Slot> slots_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::string> lease_to_slot_
      ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<WaiterId, std::string> waiter_to_slot_
      ABSL_GUARDED_BY(mu_);
  Counts counts_ ABSL_GUARDED_BY(mu_);
  const std::shared_ptr<WakeTarget> wake_target_;
  // Leases out per "host/pid".
  absl::flat_hash_map<std::string, int> leases_by_holder_ ABSL_GUARDED_BY(mu_);
  // Last: destroyed (its threads joined) before what they use.
  IoWorkers io_;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_LOCKS_LOCK_TABLE_H_
