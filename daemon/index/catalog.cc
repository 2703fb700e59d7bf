#include "daemon/index/catalog.h"

#include "absl/synchronization/notification.h"

namespace neffd {

struct Catalog::Probe {
  absl::Notification done;
  FindResult result = std::nullopt;
};

Catalog::Catalog(Store* neff_store, Store* hlo_store, Index* index, Env* env,
                 absl::Duration revalidate)
    : neff_store_(neff_store),
      hlo_store_(hlo_store),
      index_(index),
      env_(env),
      revalidate_(revalidate) {}

void Catalog::Invalidate(const std::string& canonical) {
  hot_.erase(canonical);
  ++generation_;
}

Store& Catalog::StoreFor(Namespace ns) const {
  return ns == Namespace::kNeff ? *neff_store_ : *hlo_store_;
}

Store& Catalog::StoreFor(const EntryKey& id) const { return StoreFor(id.ns()); }

void Catalog::Touch(const std::string& canonical) {
  absl::MutexLock lock(&mu_);
  accessed_[canonical] = env_->Now();
}

Catalog::FindResult Catalog::Find(const EntryKey& id) {
  const std::string canonical = id.Canonical();
  uint64_t generation = 0;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = env_->Now();
    auto it = hot_.find(canonical);
    if (it != hot_.end() && now - it->second.validated < revalidate_) {
      accessed_[canonical] = now;
      return it->second.entry;
    }
    generation = generation_;
  }
  // An index that cannot be read is skipped: the store answers.
  absl::StatusOr<std::optional<v1::IndexRecord>> record = index_->Get(id);
  if (record.ok() && record->has_value()) {
    v1::IndexRecord& r = **record;
    FileIdentity verified{r.verified_inode(), r.entry().size(),
                          r.verified_mtime_ns(), r.verified_ctime_ns()};
    if (StoreFor(id).StillValid(id, verified)) {
      absl::MutexLock lock(&mu_);
      const absl::Time now = env_->Now();
      accessed_[canonical] = now;
      if (generation == generation_) hot_[canonical] = Hot{now, r.entry()};
      return std::move(*r.mutable_entry());
    }
    {
      absl::MutexLock lock(&mu_);
      Invalidate(canonical);
    }
    if (!index_->Delete(id).ok()) ++index_write_failures_;
  }
  // One probe per key at a time; latecomers share its result.
  std::shared_ptr<Probe> probe;
  bool leader = false;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Probe>& slot = probes_[canonical];
    if (slot == nullptr) {
      slot = std::make_shared<Probe>();
      leader = true;
    }
    probe = slot;
  }
  if (!leader) {
    probe->done.WaitForNotification();
    return probe->result;
  }
  probe->result = ProbeStore(id);
  {
    absl::MutexLock lock(&mu_);
    probes_.erase(canonical);
  }
  probe->done.Notify();
  return probe->result;
}

Catalog::FindResult Catalog::ProbeStore(const EntryKey& id) {
  absl::StatusOr<StoredEntry> stored = StoreFor(id).Find(id);
  if (absl::IsNotFound(stored.status())) return std::nullopt;
  if (!stored.ok()) return stored.status();
  // Verified on the store: a hit whether or not the index takes it.
  (void)Record(id, *stored);
  Touch(id.Canonical());
  if (stored->adopted && adoption_observer_) {
    adoption_observer_(id, stored->entry);
  }
  return stored->entry;
}

absl::Status Catalog::Record(const EntryKey& id, const StoredEntry& stored) {
  {
    absl::MutexLock lock(&mu_);
    Invalidate(id.Canonical());
  }
  v1::IndexRecord record;
  *record.mutable_entry() = stored.entry;
  record.set_verified_inode(stored.identity.inode);
  record.set_verified_mtime_ns(stored.identity.mtime_ns);
  record.set_verified_ctime_ns(stored.identity.ctime_ns);
  record.set_last_access_unix_ms(absl::ToUnixMillis(env_->Now()));
  absl::Status written = index_->Put(id, record);
  if (!written.ok()) ++index_write_failures_;
  return written;
}

absl::Status Catalog::Forget(const EntryKey& id) {
  {
    absl::MutexLock lock(&mu_);
    accessed_.erase(id.Canonical());
    Invalidate(id.Canonical());
  }
  return index_->Delete(id);
}

absl::Time Catalog::LastServed(const EntryKey& id) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = accessed_.find(id.Canonical());
    if (it != accessed_.end()) return it->second;
  }
  absl::StatusOr<std::optional<v1::IndexRecord>> record = index_->Get(id);
  if (record.ok() && record->has_value()) return LastServed(id, **record);
  return absl::InfinitePast();
}

absl::Time Catalog::LastServed(const EntryKey& id,
                               const v1::IndexRecord& record) const {
  {
    absl::MutexLock lock(&mu_);
    auto it = accessed_.find(id.Canonical());
    if (it != accessed_.end()) return it->second;
  }
  if (record.last_access_unix_ms() > 0) {
    return absl::FromUnixMillis(record.last_access_unix_ms());
  }
  return absl::InfinitePast();
}

absl::Status Catalog::FlushAccessTimes() {
  absl::flat_hash_map<std::string, absl::Time> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(accessed_);
    const absl::Time now = env_->Now();
    absl::erase_if(hot_, [&](const auto& kv) {
      return now - kv.second.validated >= revalidate_;
    });
  }
  if (access_observer_) access_observer_(batch);
  for (const auto& [canonical, when] : batch) {
    absl::StatusOr<EntryKey> id = EntryKey::FromCanonical(canonical);
    if (!id.ok()) continue;
    absl::StatusOr<std::optional<v1::IndexRecord>> record = index_->Get(*id);
    if (!record.ok() || !record->has_value()) continue;
    (*record)->set_last_access_unix_ms(absl::ToUnixMillis(when));
    if (absl::Status s = index_->Put(*id, **record); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace neffd
