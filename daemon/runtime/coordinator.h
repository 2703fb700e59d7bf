// daemon/runtime/coordinator.h
//
// The daemon's cross-host coordinator when --coordinator=etcd://... is set
// (docs/ARCHITECTURE.md, "Coordination on etcd"): the etcd client, the
// lease files an etcd holder keeps (FileLocksOptions::etcd_fenced), and the
// etcd locks the LockTable takes keys with; and what GetStats and GetLocks
// report of them. Part of the composition root (daemon/runtime/daemon.cc).
#ifndef NEFFD_DAEMON_RUNTIME_COORDINATOR_H_
#define NEFFD_DAEMON_RUNTIME_COORDINATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "daemon/etcd/etcd_client.h"
#include "daemon/etcd/etcd_locks.h"
#include "daemon/locks/file_locks.h"
#include "daemon/runtime/daemon.h"
#include "proto/neffd/v1/neffd.pb.h"

namespace neffd {

struct EtcdCoordinator {
  std::unique_ptr<etcd::EtcdClient> client;
  std::unique_ptr<ExternalLocks> fenced;
  std::unique_ptr<etcd::EtcdLocks> locks;
};

// Connects to options.coordinator's etcd and starts the etcd locks over
// `files` (the host's file locks' options) and `fallback` (the file locks
// themselves, for while etcd fails; not owned). InvalidArgument for bad
// TLS files. The caller keeps `locks` destroyed before the other two.
absl::StatusOr<EtcdCoordinator> StartEtcdCoordinator(
    const DaemonOptions& options, const FileLocksOptions& files,
    ExternalLocks* fallback);

// Stats.coordinator and the etcd_* fields.
void FillCoordinatorStats(const etcd::EtcdLocks& locks, v1::Stats* stats);
// LocksResponse.cluster_holders, or why etcd did not answer.
void FillClusterHolders(etcd::EtcdLocks& locks, v1::LocksResponse* response);

}  // namespace neffd

#endif  // NEFFD_DAEMON_RUNTIME_COORDINATOR_H_
