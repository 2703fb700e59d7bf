#include "daemon/remote_tier/outbox.h"

#include <algorithm>
#include <utility>

#include "daemon/log/log.h"

namespace neffd {
namespace {

constexpr absl::Duration kFirstBackoff = absl::Seconds(1);
constexpr absl::Duration kMaxBackoff = absl::Minutes(5);

absl::Duration BackoffAfter(int failures) {
  absl::Duration backoff = kFirstBackoff;
  for (int i = 1; i < failures && backoff < kMaxBackoff; ++i) backoff *= 2;
  return std::min(backoff, kMaxBackoff);
}

}  // namespace

Outbox::Outbox(Index* index, OutboxOptions options)
    : index_(index), options_(std::move(options)) {
  const absl::Time start = options_.env->Now();
  absl::flat_hash_map<std::string, Pending> loaded;
  index_->OutboxForEach([&](absl::string_view key, absl::string_view value) {
    Pending pending;
    if (!EntryKey::FromCanonical(key).ok() ||
        !pending.record.ParseFromArray(value.data(), value.size())) {
      log::Warning("outbox_row_dropped", {{"row", key}});
      (void)index_->OutboxDelete(key);
      return true;
    }
    pending.due = start;
    loaded.emplace(std::string(key), std::move(pending));
    return true;
  });
  absl::MutexLock lock(&mu_);
  for (auto& [key, pending] : loaded) pending.generation = next_generation_++;
  pending_ = std::move(loaded);
}

absl::StatusOr<OutboxTicket> Outbox::BeginPublish(const EntryKey& id,
                                                  uint64_t size,
                                                  const std::string& sha256) {
  const std::string key = id.Canonical();
  OutboxTicket ticket;
  Pending fresh;
  {
    absl::MutexLock lock(&mu_);
    ticket.generation = next_generation_++;
    if (auto it = pending_.find(key); it != pending_.end()) {
      // Its row is on disk already and promises the same upload.
      it->second.publishing = true;
      it->second.generation = ticket.generation;
      return ticket;
    }
    fresh.record.set_size(size);
    fresh.record.set_sha256(sha256);
    fresh.record.set_enqueued_unix_ms(absl::ToUnixMillis(options_.env->Now()));
    fresh.generation = ticket.generation;
    fresh.publishing = true;
    pending_[key] = fresh;
    ticket.created = true;
  }
  // Outside mu_, so that concurrent publishes share RocksDB's WAL syncs.
  // No other call removes the row meanwhile: it is publishing.
  if (absl::Status s = index_->OutboxPut(key, fresh.record.SerializeAsString());
      !s.ok()) {
    absl::MutexLock lock(&mu_);
    pending_.erase(key);
    return s;
  }
  return ticket;
}

void Outbox::EndPublish(const EntryKey& id, const OutboxTicket& ticket,
                        bool stored) {
  const std::string key = id.Canonical();
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(key);
  if (it == pending_.end() || it->second.generation != ticket.generation) {
    return;
  }
  Pending& pending = it->second;
  pending.publishing = false;
  if (stored) {
    pending.committed = true;
    pending.failures = 0;
    pending.due = options_.env->Now();
  } else if (ticket.created) {
    Remove(key);
  }
}

Outbox::Pending* Outbox::Current(const OutboxItem& item) {
  auto it = pending_.find(item.id.Canonical());
  if (it == pending_.end() || it->second.generation != item.generation ||
      it->second.publishing) {
    return nullptr;
  }
  return &it->second;
}

void Outbox::Remove(const std::string& key) {
  if (absl::Status s = index_->OutboxDelete(key); !s.ok()) {
    log::Warning("outbox_delete_failed", {{"id", key}, {"error", s.message()}});
  }
  pending_.erase(key);
}

std::optional<OutboxItem> Outbox::NextDue() const {
  const absl::Time now = options_.env->Now();
  absl::MutexLock lock(&mu_);
  const std::pair<const std::string, Pending>* first = nullptr;
  for (const auto& row : pending_) {
    if (!row.second.publishing && row.second.due <= now &&
        (first == nullptr || row.second.due < first->second.due)) {
      first = &row;
    }
  }
  if (first == nullptr) return std::nullopt;
  return OutboxItem{*EntryKey::FromCanonical(first->first),
                    first->second.record, first->second.generation,
                    first->second.committed};
}

absl::Time Outbox::NextDueTime() const {
  absl::MutexLock lock(&mu_);
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [key, pending] : pending_) {
    if (!pending.publishing) next = std::min(next, pending.due);
  }
  return next;
}

void Outbox::Done(const OutboxItem& item) {
  absl::MutexLock lock(&mu_);
  if (Current(item) != nullptr) Remove(item.id.Canonical());
}

void Outbox::Retry(const OutboxItem& item, absl::Time not_before,
                   bool count_failure) {
  absl::MutexLock lock(&mu_);
  Pending* pending = Current(item);
  if (pending == nullptr) return;
  if (!count_failure) {
    pending->due = std::max(not_before, options_.env->Now() + kFirstBackoff);
    return;
  }
  ++pending->failures;
  pending->due = std::max(
      not_before, options_.env->Now() + BackoffAfter(pending->failures));
}

bool Outbox::Absent(const OutboxItem& item) {
  const absl::Time now = options_.env->Now();
  absl::MutexLock lock(&mu_);
  Pending* pending = Current(item);
  if (pending == nullptr) return false;
  const absl::Time queued =
      absl::FromUnixMillis(pending->record.enqueued_unix_ms());
  if (pending->committed || now - queued >= options_.absent_grace) {
    Remove(item.id.Canonical());
    return true;
  }
  ++pending->failures;
  pending->due = now + BackoffAfter(pending->failures);
  return false;
}

size_t Outbox::size() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

absl::Duration Outbox::OldestAge() const {
  const absl::Time now = options_.env->Now();
  absl::MutexLock lock(&mu_);
  int64_t oldest = -1;
  for (const auto& [key, pending] : pending_) {
    const int64_t at = pending.record.enqueued_unix_ms();
    if (oldest < 0 || at < oldest) oldest = at;
  }
  if (oldest < 0) return absl::ZeroDuration();
  return std::max(absl::ZeroDuration(), now - absl::FromUnixMillis(oldest));
}

}  // namespace neffd
