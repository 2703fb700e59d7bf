// daemon/publish/publisher.h
//
// Publisher carries out what a lease holder hands back: a compiled entry
// (Publish) or a compile failure (RecordFailure). It is the protocol between
// the lease (LockTable), the shared store, this host's local tier and the
// index; the gRPC service only validates requests and translates them
// (daemon/server/compile_cache_service.h).
//
// Publish(id, artifact):
//   1. The lease is checked and pinned (LockTable::BeginPublish) before the
//      staged file is touched, so a caller without the lease cannot make the
//      daemon read or remove files, and a pinned lease is never revoked.
//   2. A staged file is used only if it is a regular file with a single link
//      (not a symlink, not a hard link to a file the caller could not read)
//      and of the announced size.
//   3. A neff entry's staged file becomes the tier's verified copy in one
//      pass over its bytes (LocalTier::Ingest: hashed in place and renamed,
//      or, another user's, copied and hashed at once), unless the store has
//      the entry already. Up to 1 MiB the tier's copy comes first: as soon
//      as it matched the announced size and sha256 the key's parked waiters
//      are answered READY with it, on the publisher's answering thread
//      (answerer.h), while the store copies the tier's file (in the kernel,
//      not hashed again: store/digest.h RememberVerified) and fsyncs it.
//      Larger, the same pass also writes the store's temp file (the bytes
//      are read and hashed once, the store's writeback runs behind the
//      copy), and the waiters are answered as soon as the store has
//      checked the bytes, while it fsyncs them. Waiters never wait for the
//      shared store's durability; the publisher's answer does, and the
//      answers are waited for before the lease ends. Anything else (hlo
//      entries, no tier, a staged file the tier refused) is copied and
//      hashed by the store in one pass, as the store's own check of the
//      bytes. An empty sha256 in the request takes the bytes' own digest.
//   4. On success the entry is recorded in the index (a failed index write
//      is logged, not returned: the entry is on the store, the truth) and
//      the lease ends with it (every waiter, including later ones, gets
//      READY); if the store
//      refused the bytes, the pin is dropped and the holder keeps its lease
//      and may retry.
// A staged file that could be opened is the daemon's from then on: adopted
// by the tier or removed, whatever the outcome.
//
// A PublishIntent passed to Publish hears of the entry once the store has
// its copy of the verified bytes and before it commits them (after this
// host's waiters were handed the tier copy), and again when the publish ended:
// what must follow every new entry (the S3 tier's upload outbox) is recorded
// before the entry can exist, so no crash leaves the entry without the record,
// and a publish refused or already cached records nothing.
//
// RecordFailure(id, lease_id, compiler_log): pins the lease while the failure
// is written (so only its holder can record one), then hands the lease back:
// every waiter gets kFailed.
//
// Errors name the request field they concern ("staged_path: ...", "size:
// ..."): FailedPrecondition for a lease that is not held or a staged file
// that cannot be used, InvalidArgument for a size that does not match, and
// the store's and index's own errors otherwise.
//
// Thread-safe. The catalog, lock table and tier must outlive the publisher.
#ifndef NEFFD_DAEMON_PUBLISH_PUBLISHER_H_
#define NEFFD_DAEMON_PUBLISH_PUBLISHER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "daemon/index/catalog.h"
#include "daemon/locks/lock_table.h"
#include "daemon/publish/answerer.h"
#include "daemon/tier/local_tier.h"
#include "proto/neffd/v1/records.pb.h"
#include "store/entry_id.h"
#include "store/env.h"
#include "store/store.h"

namespace neffd {

struct PublisherOptions {
  // Recorded as the producer of what this host publishes.
  std::string host_id;
  // The clock and the answerer's thread.
  Env* env = Env::Default();
  // Asked about each staged file before it is read (the staging quota,
  // daemon/publish/staging_quota.h); an error refuses the publish and
  // removes the staged file. Unset: no check.
  std::function<absl::Status(const std::string& staged_path)> check_staged;
};

// What a lease holder publishes: exactly one of `inline_bytes` and
// `staged_path` (a file in the daemon's staging directory, already checked
// to be named directly inside it).
struct Artifact {
  std::string lease_id;
  std::optional<absl::string_view> inline_bytes;
  std::string staged_path;
  uint64_t size = 0;
  std::string sha256;  // lowercase hex; empty: the bytes' own digest
  std::map<std::string, std::string> metadata;
};

struct Published {
  // The entry as the publisher should use it (the tier's copy when there is
  // one).
  v1::Entry entry;
  bool already_cached = false;
};

struct RecordedFailure {
  v1::Failure failure;
  // Handing the lease back; not OK if the lease ended meanwhile (the failure
  // stays recorded).
  absl::Status released;
};

// Told of one publish around the store's commit (see the top comment).
class PublishIntent {
 public:
  virtual ~PublishIntent() = default;
  // The store verified `size` bytes hashing to `sha256` that will become
  // the entry, none of it under its final names yet (Store::PublishFromFd's
  // `verified`). Called at most once, on the publishing thread; the commit
  // waits for it.
  virtual void Begin(const EntryKey& id, uint64_t size,
                     const std::string& sha256) = 0;
  // The publish ended; `stored`: it put a new entry on the store (false:
  // refused, failed, or the store had the entry already). Called once per
  // Publish, after Begin or without it.
  virtual void End(bool stored) = 0;
};

class Publisher {
 public:
  // `tier` may be null (no local copies).
  Publisher(PublisherOptions options, Catalog* catalog, LockTable* locks,
            LocalTier* tier);

  // `intent` may be null.
  absl::StatusOr<Published> Publish(const EntryKey& id,
                                    const Artifact& artifact,
                                    PublishIntent* intent = nullptr);

  absl::StatusOr<RecordedFailure> RecordFailure(const EntryKey& id,
                                                const std::string& lease_id,
                                                absl::string_view compiler_log);

 private:
  // Up to this size a staged NEFF's waiters are answered before the store
  // is touched; above it the tier's copy and the store's are written in
  // one pass (PublishStaged).
  static constexpr uint64_t kAnswerBeforeStoreMaxBytes = 1 << 20;

  // Stores a staged file, answering the waiters from the tier's copy once
  // it is verified, and calling `begin` once the store has verified it.
  absl::StatusOr<PublishResult> PublishStaged(const EntryKey& id,
                                              const Artifact& artifact,
                                              absl::Time started,
                                              const Store::Verified& begin);
  // Answers the lease's parked waiters with the tier's copy of `local`, on
  // the answering thread.
  Answerer::Ticket AnswerWaiters(const EntryKey& id, const v1::Entry& local,
                                 const std::string& lease_id,
                                 absl::Time started);

  const PublisherOptions options_;
  Catalog* const catalog_;
  LockTable* const locks_;
  LocalTier* const tier_;
  Answerer answerer_;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_PUBLISH_PUBLISHER_H_
