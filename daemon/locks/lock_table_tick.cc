// The LockTable's periodic pass (Tick: revocation, refreshes, timeouts,
// polls) and what operators see of it: draining, the leases, the counts.
// The contract is daemon/locks/lock_table.h's.
#include "daemon/locks/lock_table.h"

namespace neffd {

void LockTable::Tick() {
  // /proc reads happen here, outside the mutex; shared-filesystem calls
  // (lease-file refreshes, store probes, takes and releases) on the workers,
  // each reporting its own result, so a stalled one delays only its key.
  struct Observed {
    std::string lease_id;
    HolderInfo holder;
    uint64_t token;
  };
  std::vector<Observed> observed;
  IoWorkers::Batch io(&io_);
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
        if (lease.external != nullptr && !lease.refreshing &&
            now - lease.refreshed >= options_.lease_ttl / 3) {
          lease.refreshed = now;
          lease.refreshing = true;
          io.Add([this, external = lease.external, id = lease.lease_id] {
            external->Refresh();
            absl::MutexLock lock(&mu_);
            absl::StatusOr<Slot*> slot = FindLease(id, nullptr);
            if (slot.ok()) (*slot)->lease->refreshing = false;
          });
        }
      } else if (options_.probe_entry && !slot.waiters.empty() &&
                 slot.next_poll <= now && !slot.probing && !slot.io_busy &&
                 slot.handover == nullptr) {
        slot.probing = true;
        io.Add([this, id = slot.id] { Probe(id); });
      }
    }
  }
  absl::flat_hash_map<std::string, bool> dead;
  for (const Observed& o : observed) {
    if (!options_.liveness->IsAlive(o.holder, o.token)) dead[o.lease_id] = true;
  }
  // Published entries first: waiters answered READY need no lease.
  io.WaitFor(options_.tick_io_wait);

  Outside out;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = options_.env->Now();
    std::vector<EntryKey> keys;  // Settle may drop slots
    for (auto& [canonical, slot] : slots_) {
      if (slot.lease.has_value() && !slot.lease->publishing &&
          (now >= slot.lease->expires || dead.contains(slot.lease->lease_id))) {
        EndLease(slot, /*keep_external=*/true, out);
        ++counts_.revoked;
      }
      for (auto w = slot.waiters.begin(); w != slot.waiters.end();) {
        if (w->deadline > now) {
          ++w;
          continue;
        }
        w = AnswerAndDrop(slot, w, LockOutcome::kTimedOut, out);
        ++counts_.timeouts;
      }
      keys.push_back(slot.id);
    }
    for (const EntryKey& id : keys) {
      if (Slot* slot = FindSlot(id)) Settle(*slot, now, out);
    }
  }
  IoWorkers::Batch handoffs(&io_);
  Finish(out, &handoffs);
  handoffs.WaitFor(options_.tick_io_wait);
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
  Outside out;
  {
    absl::MutexLock lock(&mu_);
    shutting_down_ = true;
    for (auto& [canonical, slot] : slots_) {
      for (Waiter& w : slot.waiters) {
        LockEvent event;
        event.outcome = LockOutcome::kShutdown;
        out.callbacks.emplace_back(std::move(w.done), std::move(event));
      }
      slot.waiters.clear();
    }
    waiter_to_slot_.clear();
  }
  Finish(out);
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
