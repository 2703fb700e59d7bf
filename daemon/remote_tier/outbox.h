// daemon/remote_tier/outbox.h
//
// Outbox is the S3 tier's upload queue: one row per entry this host is
// publishing or published and has not uploaded yet, kept in the index's
// RocksDB (a column family of its own, daemon/index/index.h). Rows are keyed
// by EntryKey::Canonical() (an entry queued twice is one row) and hold the
// size and sha256 being published.
//
// A row is an intent: BeginPublish writes it (synced) once the store has
// verified the bytes and before it commits them, so every entry this host
// publishes has its row on disk before the entry can exist, whatever
// instant the process dies (a SIGKILL, a power loss). EndPublish says how
// the publish ended: a stored entry's row falls due; the row of a publish
// that failed after all goes (unsynced) unless it was queued before. While
// its publish runs a row is never due, so the uploader cannot judge an
// entry that is still being written.
//
// The uploader reports back with Done (sent, or not worth sending), Retry
// (an S3 failure: 1 s, doubling per failure up to 5 min) and Absent (the
// shared store has no complete entry). An absent entry whose commit this
// process saw was removed since (gc, evict, quarantine): its row goes. One
// whose row an earlier run left may still appear (its publisher died
// mid-publish and the rank retries): it is deferred with the same backoff and
// goes only once it is still absent `absent_grace` after it was queued. Rows
// loaded at start are due at once. A result about a row that a publish began
// again meanwhile is ignored (OutboxItem::generation). Nothing here talks to S3
// (daemon/remote_tier/remote_tier.h does).
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
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/index/index.h"
#include "proto/neffd/v1/records.pb.h"
#include "store/entry_id.h"
#include "store/env.h"

namespace neffd {

struct OutboxItem {
  EntryKey id;
  v1::OutboxRecord record;
  // Which BeginPublish (or the load) the item comes from.
  uint64_t generation = 0;
  // This process saw the entry committed to the store.
  bool committed = false;
};

// What BeginPublish hands to EndPublish.
struct OutboxTicket {
  uint64_t generation = 0;
  bool created = false;  // the publish wrote the row (none was queued)
};

struct OutboxOptions {
  Env* env = Env::Default();  // the clock
  // How long a row left by an earlier run may wait for its entry to appear
  // on the shared store: the rank whose publish died with the daemon
  // retries at once (through the restarted daemon or the client's
  // fallback); ten minutes also covers a slow daemon restart.
  absl::Duration absent_grace = absl::Minutes(10);
};

class Outbox {
 public:
  // Loads the rows earlier runs left (rows that do not parse are dropped).
  explicit Outbox(Index* index, OutboxOptions options = {});

  // A publish of `id` is about to commit: the row is written (synced)
  // unless `id` is queued already, and is not due until EndPublish. An error
  // (the row could not be written) means the entry will not be uploaded;
  // EndPublish must not follow.
  absl::StatusOr<OutboxTicket> BeginPublish(const EntryKey& id, uint64_t size,
                                            const std::string& sha256);
  // `stored`: the publish put the entry on the store, due now. Otherwise
  // the row goes, unless it was queued before the publish began.
  void EndPublish(const EntryKey& id, const OutboxTicket& ticket, bool stored);

  // The queued entry due first, if one is due now; it stays queued until
  // Done(), Retry() or Absent() says otherwise.
  std::optional<OutboxItem> NextDue() const;
  // When the next entry falls due (InfiniteFuture when none is due ever).
  absl::Time NextDueTime() const;

  // Uploaded (or no longer worth uploading): the row goes.
  void Done(const OutboxItem& item);
  // Failed: due again after the entry's next backoff, or at `not_before`
  // if later. `count_failure` false (a call the breaker skipped) neither
  // grows the backoff nor waits for it: due at `not_before` (the breaker's
  // next probe), at least a second from now.
  void Retry(const OutboxItem& item, absl::Time not_before, bool count_failure);
  // The shared store has no complete entry for the item. True if the row
  // went (see the top comment); false if it waits (or the item is stale).
  bool Absent(const OutboxItem& item);

  size_t size() const;
  // How long the oldest queued entry has waited (zero when empty).
  absl::Duration OldestAge() const;

 private:
  struct Pending {
    v1::OutboxRecord record;
    int failures = 0;
    absl::Time due;
    uint64_t generation = 0;
    bool publishing = false;
    bool committed = false;
  };

  // The row of `item` if it is still the one the item came from, and no
  // publish of it runs.
  Pending* Current(const OutboxItem& item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Removes `key`'s row from memory and (unsynced) from the index.
  void Remove(const std::string& key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Index* const index_;
  const OutboxOptions options_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Pending> pending_ ABSL_GUARDED_BY(mu_);
  uint64_t next_generation_ ABSL_GUARDED_BY(mu_) = 1;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_REMOTE_TIER_OUTBOX_H_
