#include "daemon/locks/lock_table.h"

#include <openssl/rand.h>

#include <algorithm>

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

LockTable::LockTable(LockTableOptions options)
    : options_(std::move(options)),
      wake_target_(std::make_shared<WakeTarget>()),
      io_(std::max(1, options_.io_threads), options_.env) {
  absl::MutexLock lock(&wake_target_->mu);
  wake_target_->table = this;
}

LockTable::~LockTable() {
  absl::MutexLock lock(&wake_target_->mu);
  wake_target_->table = nullptr;
}

void LockTable::Finish(Outside& out, IoWorkers::Batch* batch) {
  auto run = [batch](std::function<void()> call) {
    if (batch != nullptr) {
      batch->Add(std::move(call));
    } else {
      call();
    }
  };
  for (auto& [done, event] : out.callbacks) {
    run([done = std::move(done), event = std::move(event)]() mutable {
      done(std::move(event));
    });
  }
  for (auto& [id, external] : out.releases) {
    run([this, id = std::move(id), external = std::move(external)]() mutable {
      Release(id, std::move(external));
    });
  }
  for (EntryKey& id : out.takes) {
    run([this, id = std::move(id)] { Take(id); });
  }
  for (EntryKey& id : out.probes) {
    run([this, id = std::move(id)] { Probe(id); });
  }
  out = Outside();
}

LockTable::Slot* LockTable::FindSlot(const EntryKey& id) {
  auto it = slots_.find(id.Canonical());
  return it == slots_.end() ? nullptr : &it->second;
}

void LockTable::Grant(Slot& slot, Waiter waiter, std::string lease_id,
                      std::shared_ptr<ExternalLock> external, Outside& out) {
  Lease lease;
  lease.lease_id = std::move(lease_id);
  lease.external = std::move(external);
  lease.holder = waiter.holder;
  lease.liveness_token = options_.liveness
                             ? options_.liveness->Observe(waiter.holder)
                             : std::nullopt;
  lease.refreshed = options_.env->Now();
  lease.granted = lease.refreshed;
  lease.expires = lease.refreshed + options_.lease_ttl;
  LockEvent granted;
  granted.outcome = LockOutcome::kGranted;
  granted.lease_id = lease.lease_id;
  lease_to_slot_[lease.lease_id] = slot.id.Canonical();
  ++leases_by_holder_[HolderKey(waiter.holder)];
  waiter_to_slot_.erase(waiter.id);
  slot.lease = std::move(lease);
  ++counts_.grants;
  out.callbacks.emplace_back(std::move(waiter.done), std::move(granted));
}

void LockTable::Settle(Slot& slot, absl::Time now, Outside& out) {
  if (!slot.lease.has_value() && !slot.io_busy) {
    if (slot.handover != nullptr && !slot.waiters.empty()) {
      // The lease's holds pass to the next waiter: no I/O.
      if (std::optional<std::string> id = NewLeaseId()) {
        Waiter next = std::move(slot.waiters.front());
        slot.waiters.pop_front();
        Grant(slot, std::move(next), *std::move(id), std::move(slot.handover),
              out);
      }
    }
    if (slot.handover != nullptr && slot.waiters.empty()) {
      slot.io_busy = true;
      out.releases.emplace_back(slot.id, std::move(slot.handover));
      slot.handover = nullptr;
    } else if (slot.handover == nullptr && !slot.waiters.empty() &&
               !slot.probing && slot.next_poll <= now) {
      slot.io_busy = true;
      slot.woken = false;
      out.takes.push_back(slot.id);
    }
  }
  DropIfIdle(slot.id.Canonical());
}

void LockTable::Take(const EntryKey& id) {
  std::optional<std::string> lease_id = NewLeaseId();
  std::shared_ptr<ExternalLock> external;
  bool taken = lease_id.has_value();
  bool watching = false;
  if (taken && options_.external_locks != nullptr) {
    std::function<void()> wake = [target = wake_target_, id] {
      absl::MutexLock lock(&target->mu);
      if (target->table != nullptr) target->table->Wake(id);
    };
    external = options_.external_locks->TryTakeOrWatch(
        id, *lease_id, std::move(wake), &watching);
    taken = external != nullptr;
  }
  Outside out;
  {
    absl::MutexLock lock(&mu_);
    Slot* slot = FindSlot(id);  // io_busy kept it
    if (slot == nullptr) {
      out.releases.emplace_back(id, std::move(external));
    } else {
      slot->io_busy = false;
      const absl::Time now = options_.env->Now();
      if (!taken) {
        // Held elsewhere (or no lease id): looked at again at the next poll,
        // or when the external locks wake it; who asked without waiting
        // hears so now.
        if (!watching) {
          slot->next_poll = now + options_.poll_interval;
        } else if (!slot->woken) {
          slot->next_poll = absl::InfiniteFuture();
        } else if (options_.probe_entry) {  // woken while taking
          slot->next_poll = now;
          slot->probing = true;
          out.probes.push_back(slot->id);
        } else {
          slot->next_poll = now;
        }
        for (auto w = slot->waiters.begin(); w != slot->waiters.end();) {
          if (!w->trying || w->wait) {
            if (w->trying) ++counts_.waits;
            w->trying = false;
            ++w;
            continue;
          }
          w = AnswerAndDrop(*slot, w, LockOutcome::kBusy, out);
        }
      } else if (slot->lease.has_value() || slot->waiters.empty()) {
        slot->handover = std::move(external);  // released by Settle
      } else {
        Waiter first = std::move(slot->waiters.front());
        slot->waiters.pop_front();
        Grant(*slot, std::move(first), *std::move(lease_id),
              std::move(external), out);
      }
      Settle(*slot, now, out);
    }
  }
  Finish(out);
}

void LockTable::Release(const EntryKey& id,
                        std::shared_ptr<ExternalLock> external) {
  external.reset();  // removes the lease file: shared-filesystem I/O
  Outside out;
  {
    absl::MutexLock lock(&mu_);
    if (Slot* slot = FindSlot(id)) {
      slot->io_busy = false;
      Settle(*slot, options_.env->Now(), out);
    }
  }
  Finish(out);
}

void LockTable::Probe(const EntryKey& id) {
  std::optional<v1::Entry> entry = options_.probe_entry(id);
  Outside out;
  {
    absl::MutexLock lock(&mu_);
    Slot* slot = FindSlot(id);
    if (slot == nullptr) return;
    slot->probing = false;
    if (entry.has_value() && !slot->lease.has_value()) {
      LockEvent ready;
      ready.outcome = LockOutcome::kReady;
      ready.entry = *std::move(entry);
      for (Waiter& w : slot->waiters) {
        waiter_to_slot_.erase(w.id);
        out.callbacks.emplace_back(std::move(w.done), ready);
      }
      slot->waiters.clear();
    }
    Settle(*slot, options_.env->Now(), out);
  }
  Finish(out);
}

void LockTable::Wake(const EntryKey& id) {
  Outside out;
  {
    absl::MutexLock lock(&mu_);
    Slot* slot = FindSlot(id);
    if (slot == nullptr) return;
    slot->woken = true;
    slot->next_poll = absl::InfinitePast();
    if (options_.probe_entry && !slot->lease.has_value() &&
        !slot->waiters.empty() && !slot->probing && !slot->io_busy &&
        slot->handover == nullptr) {
      slot->probing = true;  // the entry first: a publish woke most waits
      out.probes.push_back(slot->id);
    } else {
      Settle(*slot, options_.env->Now(), out);
    }
  }
  // On the workers: the waker (etcd's watch) must not wait for the store.
  IoWorkers::Batch batch(&io_);
  Finish(out, &batch);
}

LockTable::WaiterId LockTable::Acquire(const EntryKey& id,
                                       const HolderInfo& holder, bool wait,
                                       absl::Time deadline, LockCallback done) {
  Outside out;
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
      const bool free = !slot.lease.has_value() && slot.waiters.empty() &&
                        !slot.io_busy && !slot.probing;
      if (!free && !wait) {
        event.outcome = LockOutcome::kBusy;
        DropIfIdle(canonical);
      } else if (!free && options_.max_waiters > 0 &&
                 waiter_to_slot_.size() >=
                     static_cast<size_t>(options_.max_waiters)) {
        event.outcome = LockOutcome::kOverloaded;
        DropIfIdle(canonical);
      } else {
        // A free key is taken outside the mutex; meanwhile the caller waits
        // in line like any waiter (first, since the line was empty).
        waiter_id = next_waiter_++;
        slot.waiters.push_back(
            Waiter{waiter_id, holder, deadline, std::move(done), wait, free});
        waiter_to_slot_[waiter_id] = canonical;
        if (!free) ++counts_.waits;
        if (free) {
          slot.next_poll = absl::InfinitePast();
          Settle(slot, options_.env->Now(), out);
        }
      }
    }
    if (waiter_id == 0) out.callbacks.emplace_back(std::move(done), event);
  }
  const bool answered_here = !out.takes.empty() || !out.callbacks.empty();
  Finish(out);
  if (answered_here) {
    absl::MutexLock lock(&mu_);
    if (!waiter_to_slot_.contains(waiter_id)) return 0;
  }
  return waiter_id;
}

std::deque<LockTable::Waiter>::iterator LockTable::AnswerAndDrop(
    Slot& slot, std::deque<Waiter>::iterator w, LockOutcome outcome,
    Outside& out) {
  LockEvent event;
  event.outcome = outcome;
  waiter_to_slot_.erase(w->id);
  out.callbacks.emplace_back(std::move(w->done), std::move(event));
  return slot.waiters.erase(w);
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
  Outside out;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Slot*> slot = FindLease(lease_id, &id);
    if (slot.ok()) {
      EndLease(**slot, /*keep_external=*/false, out);
      ++counts_.revoked;
      Settle(**slot, options_.env->Now(), out);
    }
  }
  Finish(out);
  return absl::FailedPreconditionError(
      "lease_id: another host broke this lease after it went stale and is "
      "compiling the entry; its result will be served");
}

void LockTable::FinishPublish(const std::string& lease_id,
                              const v1::Entry* entry) {
  Outside out;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Slot*> slot = FindLease(lease_id, nullptr);
    if (!slot.ok()) return;
    if (entry != nullptr) {
      LockEvent ready;
      ready.outcome = LockOutcome::kReady;
      ready.entry = *entry;
      ResolveAll(**slot, ready, out);
    } else {
      (*slot)->lease->publishing = false;
      (*slot)->lease->expires = options_.env->Now() + options_.lease_ttl;
    }
  }
  Finish(out);
}

size_t LockTable::AnswerWaiters(const std::string& lease_id,
                                const v1::Entry& entry) {
  Outside out;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Slot*> slot = FindLease(lease_id, nullptr);
    if (!slot.ok() || !(*slot)->lease->publishing) return 0;
    LockEvent ready;
    ready.outcome = LockOutcome::kReady;
    ready.entry = entry;
    for (Waiter& w : (*slot)->waiters) {
      waiter_to_slot_.erase(w.id);
      out.callbacks.emplace_back(std::move(w.done), ready);
    }
    (*slot)->waiters.clear();
  }
  const size_t answered = out.callbacks.size();
  Finish(out);
  return answered;
}

size_t LockTable::Waiting(const std::string& lease_id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Slot*> slot = FindLease(lease_id, nullptr);
  return slot.ok() ? (*slot)->waiters.size() : 0;
}

absl::Status LockTable::Release(const std::string& lease_id, const EntryKey& id,
                                const v1::Failure* failure) {
  Outside out;
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
      ResolveAll(**slot, failed, out);
    } else {
      EndLease(**slot, /*keep_external=*/true, out);
      Settle(**slot, options_.env->Now(), out);
    }
  }
  Finish(out);
  return absl::OkStatus();
}

void LockTable::HolderGone(const std::string& lease_id) {
  Outside out;
  {
    absl::MutexLock lock(&mu_);
    absl::StatusOr<Slot*> slot = FindLease(lease_id, nullptr);
    if (!slot.ok() || (*slot)->lease->publishing) return;
    EndLease(**slot, /*keep_external=*/true, out);
    ++counts_.revoked;
    Settle(**slot, options_.env->Now(), out);
  }
  Finish(out);
}

int LockTable::HeldBy(const HolderInfo& holder) const {
  auto held = leases_by_holder_.find(HolderKey(holder));
  return held == leases_by_holder_.end() ? 0 : held->second;
}

void LockTable::EndLease(Slot& slot, bool keep_external, Outside& out) {
  lease_to_slot_.erase(slot.lease->lease_id);
  auto held = leases_by_holder_.find(HolderKey(slot.lease->holder));
  if (held != leases_by_holder_.end() && --held->second <= 0) {
    leases_by_holder_.erase(held);
  }
  std::shared_ptr<ExternalLock> external = std::move(slot.lease->external);
  slot.lease.reset();
  if (external == nullptr) return;
  if (keep_external) {
    slot.handover = std::move(external);
  } else {
    slot.io_busy = true;
    out.releases.emplace_back(slot.id, std::move(external));
  }
}

void LockTable::ResolveAll(Slot& slot, const LockEvent& event, Outside& out) {
  if (slot.lease.has_value()) EndLease(slot, /*keep_external=*/true, out);
  for (Waiter& w : slot.waiters) {
    waiter_to_slot_.erase(w.id);
    out.callbacks.emplace_back(std::move(w.done), event);
  }
  slot.waiters.clear();
  Settle(slot, options_.env->Now(), out);
}

bool LockTable::Idle(const Slot& slot) const {
  return !slot.lease.has_value() && slot.waiters.empty() && !slot.io_busy &&
         !slot.probing && slot.handover == nullptr;
}

void LockTable::DropIfIdle(const std::string& canonical) {
  auto it = slots_.find(canonical);
  if (it != slots_.end() && Idle(it->second)) slots_.erase(it);
}

}  // namespace neffd
