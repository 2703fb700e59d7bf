// daemon/server/admin_service.h
//
// CacheAdminService implements neffd.v1.CacheAdmin (the operator commands
// behind neffctl) over Maintenance. Like CompileCacheService it validates
// every field first and names it in INVALID_ARGUMENT messages; Import accepts
// only the daemon's own cache roots, so no request makes the daemon read or
// write elsewhere. The read-only queries (ListEntries, ShowEntry, GetLocks,
// GetConfig) and the switches (Drain, Undrain, ResetStats) are in
// admin_queries.cc.
//
// The daemon serves two instances (docs/SECURITY.md): one on the admin
// socket that does everything, and one on the ranks' socket
// (`mutations_only_on` set) that answers the calls neffd.proto marks
// admin_only (proto/admin_only.h) PERMISSION_DENIED naming the admin
// socket, so a rank can read the cache's state but never change it. Each
// such handler calls CheckMutationAllowed first; admin_socket_test calls
// every CacheAdmin method on both sockets to hold the two to each other.
//
// Thread-safe.
#ifndef NEFFD_DAEMON_SERVER_ADMIN_SERVICE_H_
#define NEFFD_DAEMON_SERVER_ADMIN_SERVICE_H_

#include <functional>
#include <map>
#include <string>

#include "daemon/locks/lock_table.h"
#include "daemon/maintenance/maintenance.h"
#include "daemon/remote_tier/remote_tier.h"
#include "daemon/server/peer_credentials.h"
#include "daemon/telemetry/telemetry.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"

namespace neffd {

struct AdminOptions {
  LockTable* locks = nullptr;      // not owned
  Telemetry* telemetry = nullptr;  // not owned
  // Every counter since start (CompileCacheService::CumulativeStats).
  std::function<v1::Stats()> cumulative_stats;
  // Drains (true) or undrains the daemon: lock table and health.
  std::function<void(bool)> set_draining;
  // What GetConfig answers.
  v1::ConfigResponse config;
  // Runs an operator's gc (under the store's gc lease,
  // daemon/cluster/gc_coordinator.h); unset: Maintenance::Gc directly.
  std::function<absl::StatusOr<v1::GcResponse>(Namespace, const v1::GcRequest&)>
      gc;
  // Non-empty: the admin socket's address; every mutating call is refused
  // PERMISSION_DENIED with a message naming it.
  std::string mutations_only_on;
  // Who calls over a unix socket, for the log line of each mutating call.
  const PeerRegistry* peers = nullptr;
  // The S3 tier, for Warm (null: off).
  RemoteTier* remote = nullptr;
  // With --coordinator: adds every host's holds from etcd to GetLocks.
  std::function<void(v1::LocksResponse*)> cluster_holders;
  // {local_dir}/locks: GetLocks lists the flocks other processes hold there.
  std::string locks_dir;
  // The host's filesystem (the lock directory, /proc/locks); not owned.
  Env* env = Env::Default();
};

class CacheAdminService final : public v1::CacheAdmin::Service {
 public:
  CacheAdminService(Maintenance* maintenance, Catalog* catalog,
                    AdminOptions options)
      : maintenance_(maintenance),
        catalog_(catalog),
        options_(std::move(options)) {}

  grpc::Status Evict(grpc::ServerContext* context,
                     const v1::EvictRequest* request,
                     v1::EvictResponse* response) override;
  grpc::Status Verify(grpc::ServerContext* context,
                      const v1::VerifyRequest* request,
                      grpc::ServerWriter<v1::VerifyProgress>* writer) override;
  grpc::Status Gc(grpc::ServerContext* context, const v1::GcRequest* request,
                  v1::GcResponse* response) override;
  grpc::Status Import(grpc::ServerContext* context,
                      const v1::ImportRequest* request,
                      grpc::ServerWriter<v1::ImportProgress>* writer) override;
  grpc::Status ListEntries(grpc::ServerContext* context,
                           const v1::ListEntriesRequest* request,
                           v1::ListEntriesResponse* response) override;
  grpc::Status ShowEntry(grpc::ServerContext* context,
                         const v1::ShowEntryRequest* request,
                         v1::EntryInfo* response) override;
  grpc::Status GetLocks(grpc::ServerContext* context,
                        const v1::GetLocksRequest* request,
                        v1::LocksResponse* response) override;
  grpc::Status Drain(grpc::ServerContext* context,
                     const v1::DrainRequest* request,
                     v1::DrainResponse* response) override;
  grpc::Status Undrain(grpc::ServerContext* context,
                       const v1::DrainRequest* request,
                       v1::DrainResponse* response) override;
  grpc::Status GetConfig(grpc::ServerContext* context,
                         const v1::GetConfigRequest* request,
                         v1::ConfigResponse* response) override;
  grpc::Status ResetStats(grpc::ServerContext* context,
                          const v1::ResetStatsRequest* request,
                          v1::Stats* response) override;
  // admin_remote.cc
  grpc::Status Warm(grpc::ServerContext* context,
                    const v1::WarmRequest* request,
                    grpc::ServerWriter<v1::WarmProgress>* writer) override;
  grpc::Status Manifest(grpc::ServerContext* context,
                        const v1::ManifestRequest* request,
                        v1::ManifestResponse* response) override;

 private:
  // The leases out on this host, by EntryKey::Canonical().
  std::map<std::string, v1::LeaseInfo> LeasesByKey() const;
  // Fills `info` for an entry listed from the index.
  void AddIndexed(const EntryKey& id, const v1::IndexRecord& record,
                  v1::EntryInfo* info) const;
  grpc::Status SetDraining(const grpc::ServerContext* context, bool draining,
                           v1::DrainResponse* response);
  // PERMISSION_DENIED naming the admin socket when this instance serves the
  // ranks' socket, else OK.
  // Logs who asked (a warning: operators' actions change every host's cache).
  grpc::Status CheckMutationAllowed(const grpc::ServerContext* context,
                                    absl::string_view method) const;

  Maintenance* const maintenance_;
  Catalog* const catalog_;
  const AdminOptions options_;
};

// The namespace named by a request field ("" means neff).
absl::StatusOr<Namespace> ParseNamespaceField(absl::string_view field,
                                              absl::string_view value);

}  // namespace neffd

#endif  // NEFFD_DAEMON_SERVER_ADMIN_SERVICE_H_
