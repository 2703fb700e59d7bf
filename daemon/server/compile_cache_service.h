// daemon/server/compile_cache_service.h
//
// CompileCacheService implements neffd.v1.CompileCache over the Catalog
// (index + stores), the LockTable and the Publisher (which carries out
// Publish and Unlock(FAILED): daemon/publish/publisher.h); it validates wire
// requests and translates them, and owns no protocol of its own. It is the
// only place where wire requests are validated: every field is checked before
// it reaches a path or a table, and errors are INVALID_ARGUMENT (malformed
// field) or FAILED_PRECONDITION (valid field, wrong state: a lease that is not
// held, a staged file that is not a regular file in the staging directory),
// with a message that starts with the field's name.
//
// Lock is served with the callback API: a waiting Lock is a parked callback in
// the LockTable, not a thread. Lookup is too, because it is the call ranks
// make most and the callback API costs the least CPU per call (measured in
// docs/BENCHMARKS.md); a hit does no I/O but an occasional pair of stats. The
// Hold, the stream that binds a lease to its holder's connection, is a
// callback reactor too (hold_stream.cc): 128 holders cost 128 small objects,
// not 128 threads; when a holder's stream breaks its lease is revoked at once
// (LockTable::HolderGone). The other methods are synchronous; Publish may
// spend seconds copying and hashing a large file.
//
// Thread-safe. The stores, index, lock table, publisher and telemetry must
// outlive the service.
#ifndef NEFFD_DAEMON_SERVER_COMPILE_CACHE_SERVICE_H_
#define NEFFD_DAEMON_SERVER_COMPILE_CACHE_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "config/defaults.h"
#include "daemon/index/catalog.h"
#include "daemon/locks/lock_table.h"
#include "daemon/locks/wake_notices.h"
#include "daemon/publish/publisher.h"
#include "daemon/remote_tier/remote_tier.h"
#include "daemon/server/peer_credentials.h"
#include "daemon/server/request_validation.h"
#include "daemon/telemetry/telemetry.h"
#include "daemon/tier/local_tier.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "store/env.h"
#include "store/store.h"

namespace neffd {

struct ServiceOptions {
  std::string host_id;
  // Where clients stage files for Publish (on the local disk).
  std::string staging_dir;
  // Lock wait when the request gives none
  // (TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT).
  absl::Duration default_lock_timeout = config::kLockTimeout;
  uint64_t max_entry_bytes = config::kMaxEntryBytes;
  uint64_t max_inline_bytes = uint64_t{16} << 20;
  Env* env = Env::Default();  // the clock
  // Metadata operations made on the shared store so far (for GetStats).
  std::function<uint64_t()> shared_ops = [] { return uint64_t{0}; };
  // Who is calling over a unix socket (daemon/server/peer_credentials.h);
  // null: no such calls (an in-process server). With it, a Lock from this
  // host takes its holder's pid from the kernel, and an inline Publish
  // from a uid outside `ranks_group` (not root, not the service user) is
  // refused: such bytes would bypass the staging directory's group check.
  const PeerRegistry* peers = nullptr;
  std::string ranks_group;
  // Adds the cross-host coordinator's state to GetStats (the daemon's
  // etcd locks; unset: the filesystem protocol alone).
  std::function<void(v1::Stats*)> coordinator_stats = [](v1::Stats* stats) {
    stats->set_coordinator("filesystem");
  };
  // What this host's last gc runs left on the stores, and when (for
  // GetStats; GcCoordinator::Leftovers).
  std::function<v1::Leftovers(absl::Time*)> leftovers = [](absl::Time* when) {
    *when = absl::InfinitePast();
    return v1::Leftovers();
  };
  // The S3 tier (null: off): asked under a fresh lease before a rank is
  // told to compile, and handed what ranks publish.
  RemoteTier* remote = nullptr;
  // Where a Lock that asks for it is parked on a wake notice instead of a
  // parked call (null: never; requests are parked as calls).
  WakeNotices* wake_notices = nullptr;
};

class CompileCacheService final
    : public v1::CompileCache::WithCallbackMethod_Lookup<
          v1::CompileCache::WithCallbackMethod_Lock<
              v1::CompileCache::WithCallbackMethod_Hold<
                  v1::CompileCache::Service>>> {
 public:
  // `tier` (may be null) serves neff entries from local copies; `publisher`
  // carries out Publish and Unlock(FAILED).
  CompileCacheService(ServiceOptions options, Catalog* catalog,
                      LockTable* locks, LocalTier* tier, Publisher* publisher,
                      Telemetry* telemetry);

  // Every counter since start (GetStats reports them since the last reset),
  // with the gauges and the per-version index totals.
  v1::Stats CumulativeStats() const;

  grpc::ServerUnaryReactor* Lookup(grpc::CallbackServerContext* context,
                                   const v1::LookupRequest* request,
                                   v1::LookupResponse* response) override;
  grpc::ServerUnaryReactor* Lock(grpc::CallbackServerContext* context,
                                 const v1::LockRequest* request,
                                 v1::LockResponse* response) override;
  grpc::ServerBidiReactor<v1::KeepAliveRequest, v1::KeepAliveResponse>* Hold(
      grpc::CallbackServerContext* context) override;
  // Ends every open Hold stream (UNAVAILABLE) without revoking its lease, so
  // a server shutdown need not wait for them; later Holds are refused.
  void EndHolds();
  grpc::Status KeepAlive(grpc::ServerContext* context,
                         const v1::KeepAliveRequest* request,
                         v1::KeepAliveResponse* response) override;
  grpc::Status Publish(grpc::ServerContext* context,
                       const v1::PublishRequest* request,
                       v1::PublishResponse* response) override;
  grpc::Status Unlock(grpc::ServerContext* context,
                      const v1::UnlockRequest* request,
                      v1::UnlockResponse* response) override;
  grpc::Status GetStats(grpc::ServerContext* context,
                        const v1::GetStatsRequest* request,
                        v1::Stats* response) override;

 private:
  class LockReactor;
  class HoldReactor;

  // The caller's credentials when it came over a unix socket.
  std::optional<PeerCredentials> PeerOf(
      const grpc::ServerContextBase& context) const;

  Store& StoreFor(const EntryKey& id) const { return catalog_->StoreFor(id); }
  grpc::Status AnswerLookup(const v1::LookupRequest& request,
                            v1::LookupResponse* response);
  // The entry to hand a rank: verified, and local when the tier has it.
  // A hit is counted by the tier that had it.
  absl::StatusOr<std::optional<v1::Entry>> Serve(const EntryKey& id);
  // Fills `response` for a key that needs no lock: READY or FAILED. False if
  // the key is neither cached nor failed.
  absl::StatusOr<bool> AnswerWithoutLock(const EntryKey& id,
                                         v1::LockResponse* response);
  // Counts a Lock call's answer and how long it took.
  void CountLock(const v1::LockResponse& response, const grpc::Status& status,
                 absl::Time started);
  // A Lock's LockTable event: a grant for a key the shared store lacks goes
  // to the S3 tier first (under that lease); then CompleteLock.
  void OnLockEvent(const EntryKey& id, LockEvent event,
                   grpc::CallbackServerContext* context, LockReactor* reactor,
                   v1::LockResponse* response, absl::Time started);
  // Parks a Lock that allowed it on the key's wake notice, answering it
  // PARKED; a Lock the table answers at once, or before the notice is
  // joined, is answered as a call (OnLockEvent).
  void ParkOnNotice(const EntryKey& id, const HolderInfo& holder,
                    absl::Time deadline, grpc::CallbackServerContext* context,
                    LockReactor* reactor, v1::LockResponse* response,
                    absl::Time started);
  // A LockTable event for a caller parked on `notice`: READY or FAILED is
  // written to it; a grant is handed on (nobody is on the call to take it)
  // and the notice says ask again, as it does on shutdown.
  void OnNoticeEvent(const EntryKey& id, const WakeNotices::Notice& notice,
                     LockEvent event, absl::Time started);
  // Turns a LockTable event into the Lock response; may re-check the store.
  grpc::Status CompleteLock(const EntryKey& id, LockEvent event,
                            bool client_gone, v1::LockResponse* response);

  RequestLimits limits() const {
    RequestLimits limits;
    limits.max_entry_bytes = options_.max_entry_bytes;
    limits.max_inline_bytes = options_.max_inline_bytes;
    return limits;
  }

  const ServiceOptions options_;
  Catalog* const catalog_;
  LockTable* const locks_;
  LocalTier* const tier_;
  Publisher* const publisher_;
  Telemetry* const telemetry_;
  const absl::Time started_;

  absl::Mutex holds_mu_;
  absl::flat_hash_set<HoldReactor*> holds_ ABSL_GUARDED_BY(holds_mu_);
  bool holds_ended_ ABSL_GUARDED_BY(holds_mu_) = false;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_SERVER_COMPILE_CACHE_SERVICE_H_
