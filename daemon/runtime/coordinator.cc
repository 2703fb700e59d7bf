#include "daemon/runtime/coordinator.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/strip.h"

namespace neffd {

absl::StatusOr<EtcdCoordinator> StartEtcdCoordinator(
    const DaemonOptions& options, const FileLocksOptions& files,
    ExternalLocks* fallback) {
  etcd::EtcdOptions etcd_options;
  etcd_options.endpoints =
      std::string(absl::StripPrefix(options.coordinator, "etcd://"));
  etcd_options.call_timeout = options.etcd.call_timeout;
  etcd_options.ca = options.etcd.ca;
  etcd_options.cert = options.etcd.cert;
  etcd_options.key = options.etcd.key;
  absl::StatusOr<std::unique_ptr<etcd::EtcdClient>> client =
      etcd::EtcdClient::Connect(etcd_options);
  if (!client.ok()) return client.status();
  EtcdCoordinator coordinator;
  coordinator.client = *std::move(client);
  FileLocksOptions fenced = files;
  fenced.etcd_fenced = true;
  coordinator.fenced = NewFileLocks(fenced);
  etcd::EtcdLocksOptions locks;
  locks.client = coordinator.client.get();
  locks.host_id = options.host_id;
  locks.lease_ttl = options.etcd.lease_ttl;
  locks.retry_interval = options.etcd.call_timeout;
  locks.fenced = coordinator.fenced.get();
  locks.fallback = fallback;
  locks.env = options.env;
  absl::StatusOr<std::unique_ptr<etcd::EtcdLocks>> started =
      etcd::EtcdLocks::Start(locks);
  if (!started.ok()) return started.status();
  coordinator.locks = *std::move(started);
  return coordinator;
}

void FillCoordinatorStats(const etcd::EtcdLocks& locks, v1::Stats* stats) {
  const etcd::CoordinatorState state = locks.state();
  stats->set_coordinator("etcd");
  stats->set_etcd_healthy(state.etcd_healthy);
  stats->set_etcd_watching(state.watching);
  stats->set_etcd_fallbacks(state.fallbacks);
  stats->set_etcd_recoveries(state.recoveries);
  stats->set_etcd_takes(state.etcd_takes);
  stats->set_etcd_fallback_takes(state.fallback_takes);
  stats->set_etcd_watch_wakeups(state.watch_wakeups);
  stats->set_etcd_lease_losses(state.lease_losses);
  stats->set_etcd_watch_restarts(state.watch_restarts);
  stats->set_etcd_last_error(state.last_error);
  stats->set_etcd_lease_ttl_ms(absl::ToInt64Milliseconds(state.granted_ttl));
}

void FillClusterHolders(etcd::EtcdLocks& locks, v1::LocksResponse* response) {
  absl::StatusOr<std::vector<etcd::EtcdHolder>> holders = locks.Holders();
  if (!holders.ok()) {
    response->set_cluster_holders_error(
        std::string(holders.status().message()));
    return;
  }
  for (const etcd::EtcdHolder& h : *holders) {
    v1::ClusterHolderInfo* info = response->add_cluster_holders();
    info->set_key(h.canonical);
    info->set_host(h.host);
    info->set_pid(h.pid);
    info->set_etcd_lease(h.etcd_lease);
  }
}

}  // namespace neffd
