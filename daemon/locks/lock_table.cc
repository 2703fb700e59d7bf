#include "daemon/locks/lock_table.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/rand.h>
#include <sys/file.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace neffd {
namespace {

std::string NewLeaseId() {
  unsigned char bytes[16];
  RAND_bytes(bytes, sizeof(bytes));
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<char*>(bytes), sizeof(bytes)));
}

absl::Status NotHeld(const std::string& lease_id) {
  return absl::FailedPreconditionError(
      absl::StrCat("lease_id: lease '", absl::CHexEscape(lease_id),
                   "' is not held (unknown, expired or revoked)"));
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
  const EntryKey& id = slot.id;
  const std::string dir =
      absl::StrCat(options_.locks_dir, "/", NamespaceName(id.ns()), "/",
                   id.compiler_version());
  const std::string path = absl::StrCat(dir, "/", id.key(), ".lock");
  UniqueFd fd(
      open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0664));
  if (!fd.valid() && errno == ENOENT && MakeDirs(dir, 0775).ok()) {
    fd = UniqueFd(
        open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0664));
  }
  // An unusable lock file must not wedge the key: the in-memory lease still
  // excludes every client of this daemon.
  if (fd.valid() && flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) return false;  // held by a daemon-less process
  }
  Lease lease;
  lease.lease_id = NewLeaseId();
  lease.holder = holder;
  lease.liveness_token =
      options_.liveness ? options_.liveness->Observe(holder) : std::nullopt;
  lease.expires = options_.now() + options_.lease_ttl;
  lease.lock_file = std::move(fd);
  *lease_id = lease.lease_id;
  lease_to_slot_[lease.lease_id] = id.Canonical();
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
    } else {
      Slot& slot = slots_.try_emplace(canonical, id).first->second;
      if (!slot.lease.has_value() && slot.waiters.empty() &&
          TryGrant(slot, holder, &event.lease_id)) {
        event.outcome = LockOutcome::kGranted;
      } else if (!wait) {
        event.outcome = LockOutcome::kBusy;
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
  (*slot)->lease->expires = options_.now() + options_.lease_ttl;
  return absl::OkStatus();
}

absl::Status LockTable::BeginPublish(const std::string& lease_id,
                                     const EntryKey& id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Slot*> slot = FindLease(lease_id, &id);
  if (!slot.ok()) return slot.status();
  if ((*slot)->lease->publishing) {
    return absl::FailedPreconditionError(
        "lease_id: a publish under this lease is already in progress");
  }
  (*slot)->lease->publishing = true;
  return absl::OkStatus();
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
      (*slot)->lease->expires = options_.now() + options_.lease_ttl;
    }
  }
  Run(pending);
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

void LockTable::EndLease(Slot& slot) {
  lease_to_slot_.erase(slot.lease->lease_id);
  slot.lease.reset();  // closing the lock file releases the flock
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
  // Liveness reads /proc; do it outside the mutex on a snapshot.
  struct Observed {
    std::string lease_id;
    HolderInfo holder;
    uint64_t token;
  };
  std::vector<Observed> observed;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [canonical, slot] : slots_) {
      if (slot.lease.has_value() && slot.lease->liveness_token.has_value()) {
        observed.push_back({slot.lease->lease_id, slot.lease->holder,
                            *slot.lease->liveness_token});
      }
    }
  }
  absl::flat_hash_map<std::string, bool> dead;
  for (const Observed& o : observed) {
    if (!options_.liveness->IsAlive(o.holder, o.token)) dead[o.lease_id] = true;
  }

  Pending pending;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = options_.now();
    std::vector<std::string> idle;
    for (auto& [canonical, slot] : slots_) {
      if (slot.lease.has_value() && !slot.lease->publishing &&
          (now >= slot.lease->expires || dead.contains(slot.lease->lease_id))) {
        EndLease(slot);
        ++counts_.revoked;
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
      GrantNext(slot, pending);
      if (!slot.lease.has_value() && slot.waiters.empty()) {
        idle.push_back(canonical);
      }
    }
    for (const std::string& canonical : idle) slots_.erase(canonical);
  }
  Run(pending);
}

void LockTable::Shutdown() {
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

LockTable::Counts LockTable::counts() const {
  absl::MutexLock lock(&mu_);
  Counts c = counts_;
  c.leases_held = lease_to_slot_.size();
  c.waiters = waiter_to_slot_.size();
  return c;
}

}  // namespace neffd
