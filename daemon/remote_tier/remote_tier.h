// daemon/remote_tier/remote_tier.h
//
// RemoteTier puts S3 (daemon/s3/) behind the shared store
// (docs/REMOTE.md):
//
//   Read-through, once per cluster. When a Lock is granted for a key the
//   shared store does not have, the service hands the fresh lease to
//   FetchUnderLease before it answers: the fetch runs under that lease like
//   a compile would (the cross-host lease file included), so across a
//   cluster's hosts one host downloads and the others' waiters poll the
//   shared store as they do for a compile. The fetch reads model.done (with
//   the short lookup deadline), then model.neff into the staging directory,
//   and hands it to the Publisher with the done record's size and sha256:
//   the store verifies the bytes as it copies them, so a truncated or
//   altered object is never published or served (it is counted as corrupt
//   and the key is a miss), and a verified one is published into the shared
//   store and answers every waiter READY. Anything else (no object, an
//   error, throttling, a timeout, an open circuit breaker) is a miss counted
//   by cause: the lease is left as it was, and the rank compiles.
//
//   Write-behind, durable. A rank's publish carries an upload intent
//   (NewUploadIntent) that queues the entry in the Outbox
//   (daemon/remote_tier/outbox.h, synced into the index's RocksDB) once
//   the store verified the bytes and before it commits them, so no crash
//   leaves a published entry
//   unqueued; one uploader thread sends each entry from the shared store,
//   only once model.done vouches for a whole artifact: the artifact
//   (multipart above the threshold, streamed from disk), compile_flags.json,
//   and model.done last, so a reader never sees a done record before its
//   artifact is whole. An entry S3 has already (HEAD of model.done) is not
//   sent again. Failures are retried with backoff; an entry removed from
//   the shared store meanwhile is dropped, and one queued by an earlier run
//   that is not there waits for it a bounded time (outbox.h). In ro mode
//   nothing is queued or written.
//
// Every S3 call goes through one S3Gate (circuit breaker, one log line per
// failure cause). Fetches run on the tier's own threads, never on gRPC's or
// the scheduler's; KeepFetchesAlive (from the daemon's tick) keeps their
// leases alive however long a download takes.
//
// Thread-safe. The catalog, lock table, publisher, tier (may be null) and
// index must outlive it; Stop() before they go.
#ifndef NEFFD_DAEMON_REMOTE_TIER_REMOTE_TIER_H_
#define NEFFD_DAEMON_REMOTE_TIER_REMOTE_TIER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "daemon/index/catalog.h"
#include "daemon/locks/lock_table.h"
#include "daemon/publish/publisher.h"
#include "daemon/remote_tier/outbox.h"
#include "daemon/remote_tier/remote_tier_options.h"
#include "daemon/remote_tier/s3_gate.h"
#include "daemon/s3/credentials.h"
#include "daemon/s3/remote_layout.h"
#include "daemon/s3/s3_client.h"
#include "daemon/tier/local_tier.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "store/env.h"

namespace neffd {

struct RemoteTierParts {
  Catalog* catalog = nullptr;
  LockTable* locks = nullptr;
  Publisher* publisher = nullptr;
  LocalTier* tier = nullptr;  // may be null
  Index* index = nullptr;
  // Where downloads are staged (the daemon's staging dir: same filesystem
  // as the tier, so a fetched file is adopted, not copied).
  std::string staging_dir;
  std::string host_id;
  // The credential chain's environment (remote::ProcessEnvironment()).
  remote::Environment environment;
  Env* env = Env::Default();  // the clock and the tier's threads
};

enum class FetchOutcome {
  kPublished,  // fetched, verified and published; the lease has ended
  kAbsent,     // S3 has no entry for the key
  kCorrupt,    // S3's object failed verification; nothing published
  kFailed,     // an S3 or local error, or the breaker skipped S3
};

class RemoteTier {
 public:
  // InvalidArgument naming the flag when the options cannot work.
  static absl::StatusOr<std::unique_ptr<RemoteTier>> Open(
      const RemoteTierOptions& options, RemoteTierParts parts);
  ~RemoteTier();

  // Starts the fetch threads and (rw) the uploader.
  void Start();
  // Finishes queued fetches (as misses), joins every thread.
  void Stop();

  // Read-through under `lease_id`, just granted for `id`: fetches on a
  // thread of the tier's, then calls `done` there with the outcome (after
  // kPublished the lease has ended and the entry is in the shared store).
  void FetchUnderLease(const EntryKey& id, const std::string& lease_id,
                       std::function<void(FetchOutcome)> done);
  // The same, on the calling thread.
  FetchOutcome Fetch(const EntryKey& id, const std::string& lease_id);

  // For a rank's publish (Publisher::Publish): queues the entry before the
  // store commits it and lets it go to S3 once stored. Null in ro mode. A
  // row that cannot be written is logged (upload_not_queued) and the
  // publish goes on: S3 never fails a publish.
  std::unique_ptr<PublishIntent> NewUploadIntent();

  // Pulls `ids` into the shared store and this host's tier (neffctl warm),
  // calling `progress` after each.
  void Warm(const std::vector<EntryKey>& ids,
            const std::function<void(const v1::WarmProgress&)>& progress);

  // Extends the leases of fetches in flight; call every few seconds.
  void KeepFetchesAlive();

  // The remote_* and hits_remote fields of the stats.
  void FillStats(v1::Stats* stats) const;

  bool read_only() const { return options_.read_only; }

 private:
  RemoteTier(const RemoteTierOptions& options, RemoteTierParts parts,
             remote::RemoteLocation location);
  absl::Status CreateClients();

  // Fetch steps (fetch.cc).
  absl::StatusOr<v1::DoneRecord> FetchDoneRecord(const EntryKey& id);
  FetchOutcome FetchArtifact(const EntryKey& id, const std::string& lease_id,
                             const v1::DoneRecord& done);
  void FetchLoop();

  // Upload steps (upload.cc).
  void UploadLoop();
  // OK: uploaded or not worth uploading; the row may go. `*absent` is set
  // (and OK returned) when the shared store has no complete entry.
  absl::Status Upload(const OutboxItem& item, bool* absent);
  // Tells the outbox the item's entry is absent; logs a dropped row.
  void Absent(const OutboxItem& item);

  const RemoteTierOptions options_;
  const RemoteTierParts parts_;
  const remote::RemoteLocation location_;
  remote::CredentialsProvider credentials_;
  std::unique_ptr<remote::S3Client> client_;
  // The same bucket with the lookup deadline, for the done record a miss
  // asks for.
  std::unique_ptr<remote::S3Client> lookup_client_;
  S3Gate gate_;
  std::unique_ptr<Outbox> outbox_;  // null in ro mode

  std::atomic<uint64_t> hits_{0};
  std::atomic<uint64_t> misses_{0};
  std::atomic<uint64_t> corrupt_{0};
  std::atomic<uint64_t> uploads_{0};
  std::atomic<uint64_t> upload_failures_{0};

  struct FetchJob {
    EntryKey id;
    std::string lease_id;
    std::function<void(FetchOutcome)> done;
  };
  absl::Mutex mu_;
  // Wakes the fetch threads (a job, or Stop); the uploader has its own, so
  // a job's Signal() can never be spent on it.
  absl::CondVar fetch_wake_;
  absl::CondVar upload_wake_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<FetchJob> jobs_ ABSL_GUARDED_BY(mu_);
  // Leases of queued and running fetches, kept alive by KeepFetchesAlive.
  absl::flat_hash_set<std::string> fetch_leases_ ABSL_GUARDED_BY(mu_);
  std::vector<EnvThread> threads_;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_REMOTE_TIER_REMOTE_TIER_H_
