#include "daemon/locks/lock_table.h"

#include <openssl/rand.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace neffd {
namespace {

// A lease id is the holder's capability to publish and release, so it comes
// from OpenSSL's CSPRNG; nullopt if that fails (no lease is granted then).
std::optional<std::string> NewLeaseId() {
  unsigned char bytes[16];
  if (RAND_bytes(bytes, sizeof(bytes)) != 1) return std::nullopt;
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
}

absl::Status NotHeld(const std::string& lease_id) {
  return absl::FailedPreconditionError(
      absl::StrCat("lease_id: lease '", absl::CHexEscape(lease_id),
                   "' is not held (unknown, expired or revoked)"));
}

std::string HolderKey(const HolderInfo& holder) {
  return absl::StrCat(holder.host, "/", holder.pid);
}

}  // namespace

LockTable::LockTable(LockTableOptions options) : options_(std::move(options)) {}

LockTable::~LockTable() = default;

void LockTable::Run(Pending& pending) {
  for (auto& [done, event] : pending) done(std::move(event));
  pending.clear();
}

bool LockTable::TryGrant(Slot& slot, const HolderInfo& holder,
                         std::string* lease_id) {
  Lease lease;
  std::optional<std::string> new_id = NewLeaseId();
  if (!new_id.has_value()) {
    // Tried again at the next poll, like a key held elsewhere.
    slot.next_poll = options_.env->Now() + options_.poll_interval;
    return false;
  }
  lease.lease_id = *std::move(new_id);
  if (options_.external_locks != nullptr) {
    lease.external = options_.external_locks->TryTake(slot.id, lease.lease_id);
    if (lease.external == nullptr) {
      slot.next_poll = options_.env->Now() + options_.poll_interval;
      return false;
    }
  }
  lease.holder = holder;
  lease.liveness_token =
      options_.liveness ? options_.liveness->Observe(holder) : std::nullopt;
  lease.refreshed = options_.env->Now();
  lease.granted = lease.refreshed;
  lease.expires = lease.refreshed + options_.lease_ttl;
  *lease_id = lease.lease_id;
  lease_to_slot_[lease.lease_id] = slot.id.Canonical();
  ++leases_by_holder_[HolderKey(holder)];
  slot.lease = std::move(lease);
  ++counts_.grants;
  return true;
}

LockTable::WaiterId LockTable::Acquire(const EntryKey& id,
                                       const HolderInfo& holder, bool wait,
                                       absl::Time deadline, LockCallback done) {
  Pending pending;
  WaiterId waiter_id = 0;
  {
    absl::MutexLock lock(&mu_);
    const std::string canonical = id.Canonical();
    LockEvent event;
    if (shutting_down_) {
      event.outcome = LockOutcome::kShutdown;
    } else if (HeldBy(holder) >= options_.max_leases_per_holder &&
               options_.max_leases_per_holder > 0) {
      event.outcome = LockOutcome::kTooMany;
    } else {
      Slot& slot = slots_.try_emplace(canonical, id).first->second;
      if (!slot.lease.has_value() && slot.waiters.empty() &&
          TryGrant(slot, holder, &event.lease_id)) {
        event.outcome = LockOutcome::kGranted;
      } else if (!wait) {
        event.outcome = LockOutcome::kBusy;
        DropIfIdle(canonical);
      } else if (options_.max_waiters > 0 &&
                 waiter_to_slot_.size() >=
                     static_cast<size_t>(options_.max_waiters)) {
        event.outcome = LockOutcome::kOverloaded;
        DropIfIdle(canonical);
      } else {
        waiter_id = next_waiter_++;
        slot.waiters.push_back(
            Waiter{waiter_id, holder, deadline, std::move(done)});
        waiter_to_slot_[waiter_id] = canonical;
        ++counts_.waits;
        return waiter_id;
      }
    }
    pending.emplace_back(std::move(done), std::move(event));
  }
  Run(pending);
  return waiter_id;
}

bool LockTable::Cancel(WaiterId waiter) {
  absl::MutexLock lock(&mu_);
  auto it = waiter_to_slot_.find(waiter);
  if (it == waiter_to_slot_.end()) return false;
  const std::string canonical = it->second;
  waiter_to_slot_.erase(it);
  Slot& slot = slots_.at(canonical);
  for (auto w = slot.waiters.begin(); w != slot.waiters.end(); ++w) {
    if (w->id == waiter) {
      slot.waiters.erase(w);
      break;
    }
  }
  DropIfIdle(canonical);
  return true;
}

absl::StatusOr<LockTable::Slot*> LockTable::FindLease(
    const std::string& lease_id, const EntryKey* id) {
  auto it = lease_to_slot_.find(lease_id);
  if (it == lease_to_slot_.end()) return NotHeld(lease_id);
  Slot& slot = slots_.at(it->second);
  if (id != nullptr && !(slot.id == *id)) {
    return absl::FailedPreconditionError(
        absl::StrCat("lease_id: the lease holds ", slot.id.Canonical(),
                     ", not ", id->Canonical()));
  }
  return &slot;
}

absl::Status LockTable::KeepAlive(const std::string& lease_id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Slot*> slot = FindLease(lease_id, nullptr);
  if (!slot.ok()) return slot.status();
  (*slot)->lease->expires = options_.env->Now() + options_.lease_ttl;
  return absl::OkStatus();
}

absl::Status LockTable::BeginPublish(const std::string& lease_id,
                                     const EntryKey& id) {
  std::shared_ptr<ExternalLock> external;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Slot*> slot = FindLease(lease_id, &id);
    if (!slot.ok()) return slot.status();
    if ((*slot)->lease->publishing) {
      return absl::FailedPreconditionError(
          "lease_id: a publish under this lease is already in progress");
    }
    (*slot)->lease->publishing = true;
    external = (*slot)->lease->external;
  }
  if (external == nullptr || external->StillHeld()) return absl::OkStatus();
  // Another host judged this lease stale and took the entry over: its
  // publish wins, this one must not overwrite it.
  Pending pending;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Slot*> slot = FindLease(lease_id, &id);
    if (slot.ok()) {
      EndLease(**slot);
      ++counts_.revoked;
      GrantNext(**slot, pending);
      DropIfIdle(id.Canonical());
    }
  }
  Run(pending);
  return absl::FailedPreconditionError(
      "lease_id: another host broke this lease after it went stale and is "
      "compiling the entry; its result will be served");
}

void LockTable::FinishPublish(const std::string& lease_id,
                              const v1::Entry* entry) {
  Pending pending;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Slot*> slot = FindLease(lease_id, nullptr);
    if (!slot.ok()) return;
    if (entry != nullptr) {
      LockEvent ready;
      ready.outcome = LockOutcome::kReady;
      ready.entry = *entry;
      ResolveAll(**slot, ready, pending);
    } else {
      (*slot)->lease->publishing = false;
      (*slot)->lease->expires = options_.env->Now() + options_.lease_ttl;
    }
  }
  Run(pending);
}

size_t LockTable::AnswerWaiters(const std::string& lease_id,
                                const v1::Entry& entry) {
  Pending pending;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Slot*> slot = FindLease(lease_id, nullptr);
    if (!slot.ok() || !(*slot)->lease->publishing) return 0;
    LockEvent ready;
    ready.outcome = LockOutcome::kReady;
    ready.entry = entry;
    for (Waiter& w : (*slot)->waiters) {
      waiter_to_slot_.erase(w.id);
      pending.emplace_back(std::move(w.done), ready);
    }
    (*slot)->waiters.clear();
  }
  const size_t answered = pending.size();
  Run(pending);
  return answered;
}

absl::Status LockTable::Release(const std::string& lease_id, const EntryKey& id,
                                const v1::Failure* failure) {
  Pending pending;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Slot*> slot = FindLease(lease_id, &id);
    if (!slot.ok()) return slot.status();
    if ((*slot)->lease->publishing) {
      return absl::FailedPreconditionError(
          "lease_id: a publish under this lease is in progress");
    }
    if (failure != nullptr) {
      LockEvent failed;
      failed.outcome = LockOutcome::kFailed;
      failed.failure = *failure;
      ResolveAll(**slot, failed, pending);
    } else {
      EndLease(**slot);
      GrantNext(**slot, pending);
      DropIfIdle(id.Canonical());
    }
  }
  Run(pending);
  return absl::OkStatus();
}

int LockTable::HeldBy(const HolderInfo& holder) const {
  auto held = leases_by_holder_.find(HolderKey(holder));
  return held == leases_by_holder_.end() ? 0 : held->second;
}

void LockTable::EndLease(Slot& slot) {
  lease_to_slot_.erase(slot.lease->lease_id);
  auto held = leases_by_holder_.find(HolderKey(slot.lease->holder));
  if (held != leases_by_holder_.end() && --held->second <= 0) {
    leases_by_holder_.erase(held);
  }
  slot.lease.reset();  // drops the external locks
}

void LockTable::GrantNext(Slot& slot, Pending& pending) {
  if (slot.lease.has_value() || slot.waiters.empty()) return;
  Waiter& next = slot.waiters.front();
  LockEvent granted;
  granted.outcome = LockOutcome::kGranted;
  if (!TryGrant(slot, next.holder, &granted.lease_id)) return;
  waiter_to_slot_.erase(next.id);
  pending.emplace_back(std::move(next.done), std::move(granted));
  slot.waiters.pop_front();
}

void LockTable::ResolveAll(Slot& slot, const LockEvent& event,
                           Pending& pending) {
  if (slot.lease.has_value()) EndLease(slot);
  for (Waiter& w : slot.waiters) {
    waiter_to_slot_.erase(w.id);
    pending.emplace_back(std::move(w.done), event);
  }
  slot.waiters.clear();
  DropIfIdle(slot.id.Canonical());
}

void LockTable::DropIfIdle(const std::string& canonical) {
  auto it = slots_.find(canonical);
  if (it != slots_.end() && !it->second.lease.has_value() &&
      it->second.waiters.empty()) {
    slots_.erase(it);
  }
}

void LockTable::Tick() {
  // I/O (/proc reads, lease-file refreshes, store probes) happens outside the
  // mutex on a snapshot; decisions are made under it afterwards.
  struct Observed {
    std::string lease_id;
    HolderInfo holder;
    uint64_t token;
  };
  std::vector<Observed> observed;
  std::vector<std::shared_ptr<ExternalLock>> to_refresh;
  std::vector<EntryKey> to_probe;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = options_.env->Now();
    for (auto& [canonical, slot] : slots_) {
      if (slot.lease.has_value()) {
        Lease& lease = *slot.lease;
        if (lease.liveness_token.has_value()) {
          observed.push_back(
              {lease.lease_id, lease.holder, *lease.liveness_token});
        }
        if (lease.external != nullptr &&
            now - lease.refreshed >= options_.lease_ttl / 3) {
          lease.refreshed = now;
          to_refresh.push_back(lease.external);
        }
      } else if (!slot.waiters.empty() && slot.next_poll <= now) {
        to_probe.push_back(slot.id);
      }
    }
  }
  absl::flat_hash_map<std::string, bool> dead;
  for (const Observed& o : observed) {
    if (!options_.liveness->IsAlive(o.holder, o.token)) dead[o.lease_id] = true;
  }
  for (auto& external : to_refresh) external->Refresh();
  absl::flat_hash_map<std::string, v1::Entry> published;
  if (options_.probe_entry) {
    for (const EntryKey& id : to_probe) {
      if (std::optional<v1::Entry> e = options_.probe_entry(id)) {
        published[id.Canonical()] = *std::move(e);
      }
    }
  }

  Pending pending;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = options_.env->Now();
    std::vector<std::string> idle;
    for (auto& [canonical, slot] : slots_) {
      if (slot.lease.has_value() && !slot.lease->publishing &&
          (now >= slot.lease->expires || dead.contains(slot.lease->lease_id))) {
        EndLease(slot);
        ++counts_.revoked;
      }
      if (!slot.lease.has_value()) {
        auto found = published.find(canonical);
        if (found != published.end()) {
          LockEvent ready;
          ready.outcome = LockOutcome::kReady;
          ready.entry = found->second;
          for (Waiter& w : slot.waiters) {
            waiter_to_slot_.erase(w.id);
            pending.emplace_back(std::move(w.done), ready);
          }
          slot.waiters.clear();
        }
      }
      for (auto w = slot.waiters.begin(); w != slot.waiters.end();) {
        if (w->deadline > now) {
          ++w;
          continue;
        }
        LockEvent timed_out;
        timed_out.outcome = LockOutcome::kTimedOut;
        waiter_to_slot_.erase(w->id);
        pending.emplace_back(std::move(w->done), std::move(timed_out));
        w = slot.waiters.erase(w);
        ++counts_.timeouts;
      }
      if (slot.next_poll <= now) GrantNext(slot, pending);
      if (!slot.lease.has_value() && slot.waiters.empty()) {
        idle.push_back(canonical);
      }
    }
    for (const std::string& canonical : idle) slots_.erase(canonical);
  }
  Run(pending);
}

void LockTable::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    stopped_ = true;
  }
  Drain();
}

void LockTable::Undrain() {
  absl::MutexLock lock(&mu_);
  if (!stopped_) shutting_down_ = false;
}

bool LockTable::draining() const {
  absl::MutexLock lock(&mu_);
  return shutting_down_;
}

std::vector<LockTable::LeaseView> LockTable::Leases() const {
  absl::MutexLock lock(&mu_);
  std::vector<LeaseView> out;
  for (const auto& [canonical, slot] : slots_) {
    if (!slot.lease.has_value()) continue;
    out.push_back(LeaseView{slot.id, slot.lease->holder, slot.lease->granted,
                            slot.lease->expires, slot.waiters.size(),
                            slot.lease->publishing});
  }
  return out;
}

void LockTable::Drain() {
  Pending pending;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    for (auto& [canonical, slot] : slots_) {
      for (Waiter& w : slot.waiters) {
        LockEvent event;
        event.outcome = LockOutcome::kShutdown;
        pending.emplace_back(std::move(w.done), std::move(event));
      }
      slot.waiters.clear();
    }
    waiter_to_slot_.clear();
  }
  Run(pending);
}

bool LockTable::Held(const EntryKey& id) const {
  absl::MutexLock lock(&mu_);
  auto it = slots_.find(id.Canonical());
  return it != slots_.end() && it->second.lease.has_value();
}

LockTable::Counts LockTable::counts() const {
  absl::MutexLock lock(&mu_);
  Counts c = counts_;
  c.leases_held = lease_to_slot_.size();
  c.waiters = waiter_to_slot_.size();
  return c;
}

}  // namespace neffd
