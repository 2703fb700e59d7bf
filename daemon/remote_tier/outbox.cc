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

Outbox::Outbox(Index* index, std::function<absl::Time()> now)
    : index_(index), now_(std::move(now)) {
  const absl::Time start = now_();
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
  pending_ = std::move(loaded);
}

absl::Status Outbox::Add(const EntryKey& id, uint64_t size,
                         const std::string& sha256) {
  Pending pending;
  pending.record.set_size(size);
  pending.record.set_sha256(sha256);
  pending.record.set_enqueued_unix_ms(absl::ToUnixMillis(now_()));
  pending.due = now_();
  const std::string key = id.Canonical();
  if (absl::Status s =
          index_->OutboxPut(key, pending.record.SerializeAsString());
      !s.ok()) {
    return s;
  }
  absl::MutexLock lock(&mu_);
  pending_[key] = std::move(pending);
  return absl::OkStatus();
}

std::optional<OutboxItem> Outbox::NextDue() const {
  const absl::Time now = now_();
  absl::MutexLock lock(&mu_);
  const std::pair<const std::string, Pending>* first = nullptr;
  for (const auto& row : pending_) {
    if (row.second.due <= now &&
        (first == nullptr || row.second.due < first->second.due)) {
      first = &row;
    }
  }
  if (first == nullptr) return std::nullopt;
  return OutboxItem{*EntryKey::FromCanonical(first->first),
                    first->second.record};
}

absl::Time Outbox::NextDueTime() const {
  absl::MutexLock lock(&mu_);
  absl::Time next = absl::InfiniteFuture();
  for (const auto& [key, pending] : pending_)
    next = std::min(next, pending.due);
  return next;
}

void Outbox::Done(const EntryKey& id) {
  const std::string key = id.Canonical();
  if (absl::Status s = index_->OutboxDelete(key); !s.ok()) {
    log::Warning("outbox_delete_failed", {{"id", key}, {"error", s.message()}});
  }
  absl::MutexLock lock(&mu_);
  pending_.erase(key);
}

void Outbox::Retry(const EntryKey& id, absl::Time not_before,
                   bool count_failure) {
  absl::MutexLock lock(&mu_);
  auto it = pending_.find(id.Canonical());
  if (it == pending_.end()) return;
  Pending& pending = it->second;
  if (!count_failure) {
    pending.due = std::max(not_before, now_() + kFirstBackoff);
    return;
  }
  ++pending.failures;
  pending.due = std::max(not_before, now_() + BackoffAfter(pending.failures));
}

size_t Outbox::size() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

absl::Duration Outbox::OldestAge() const {
  const absl::Time now = now_();
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
