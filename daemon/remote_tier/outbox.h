// daemon/remote_tier/outbox.h
//
// Outbox is the S3 tier's upload queue: one row per entry this host
// published and has not uploaded yet, kept in the index's RocksDB (a column
// family of its own, daemon/index/index.h), written synced before the
// publish is answered, so it survives a restart, a SIGKILL and a power loss.
// Rows are keyed by EntryKey::Canonical() (an entry queued twice is one
// row) and hold the size and sha256 that were published.
//
// Retries are scheduled in memory: after a failed attempt the entry waits
// 1 s, doubling per failure up to 5 min; rows loaded at start are due at
// once. Nothing here talks to S3 (daemon/remote_tier/remote_tier.h does).
//
// Thread-safe. The index must outlive the outbox.
#ifndef NEFFD_DAEMON_REMOTE_TIER_OUTBOX_H_
#define NEFFD_DAEMON_REMOTE_TIER_OUTBOX_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "daemon/index/index.h"
#include "proto/neffd/v1/records.pb.h"
#include "store/entry_id.h"

namespace neffd {

struct OutboxItem {
  EntryKey id;
  v1::OutboxRecord record;
};

class Outbox {
 public:
  // Loads the rows earlier runs left (rows that do not parse are dropped).
  explicit Outbox(
      Index* index,
      std::function<absl::Time()> now = [] { return absl::Now(); });

  // Queues `id` durably; due at once.
  absl::Status Add(const EntryKey& id, uint64_t size,
                   const std::string& sha256);

  // The queued entry due first, if one is due now; it stays queued until
  // Done() or Retry().
  std::optional<OutboxItem> NextDue() const;
  // When the next entry falls due (InfiniteFuture when empty).
  absl::Time NextDueTime() const;

  // Uploaded (or no longer worth uploading): the row goes.
  void Done(const EntryKey& id);
  // Failed: due again after the entry's next backoff, or at `not_before`
  // if later. `count_failure` false (a call the breaker skipped) neither
  // grows the backoff nor waits for it: due at `not_before` (the breaker's
  // next probe), at least a second from now.
  void Retry(const EntryKey& id, absl::Time not_before, bool count_failure);

  size_t size() const;
  // How long the oldest queued entry has waited (zero when empty).
  absl::Duration OldestAge() const;

 private:
  struct Pending {
    v1::OutboxRecord record;
    int failures = 0;
    absl::Time due;
  };

  Index* const index_;
  const std::function<absl::Time()> now_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_REMOTE_TIER_OUTBOX_H_
