#include "daemon/runtime/daemon.h"

#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "daemon/cluster/gc_coordinator.h"
#include "daemon/etcd/etcd_client.h"
#include "daemon/etcd/etcd_locks.h"
#include "daemon/index/catalog.h"
#include "daemon/index/index.h"
#include "daemon/locks/file_locks.h"
#include "daemon/locks/lock_table.h"
#include "daemon/locks/wake_notices.h"
#include "daemon/log/log.h"
#include "daemon/maintenance/maintenance.h"
#include "daemon/publish/publisher.h"
#include "daemon/publish/staging_quota.h"
#include "daemon/remote_tier/remote_tier.h"
#include "daemon/runtime/coordinator.h"
#include "daemon/runtime/local_dir.h"
#include "daemon/runtime/scheduler.h"
#include "daemon/runtime/sd_notify.h"
#include "daemon/s3/credentials.h"
#include "daemon/server/admin_service.h"
#include "daemon/server/compile_cache_service.h"
#include "daemon/server/health_service.h"
#include "daemon/server/server_options.h"
#include "daemon/telemetry/telemetry.h"
#include "daemon/tier/local_tier.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/resource_quota.h"
#include "grpcpp/security/server_credentials.h"
#include "store/counting_env.h"
#include "store/file_util.h"
#include "store/liveness.h"
#include "store/store.h"

namespace neffd {
namespace {

constexpr absl::Duration kTickInterval = absl::Milliseconds(100);
constexpr absl::Duration kAccessFlushInterval = absl::Seconds(10);
constexpr absl::Duration kStagingSweepInterval = absl::Minutes(1);

// The credentials of the ranks' address and of the admin address, checked
// against the TLS options.
struct ListenerCredentials {
  std::shared_ptr<grpc::ServerCredentials> ranks;
  std::shared_ptr<grpc::ServerCredentials> admin;
};

absl::StatusOr<ListenerCredentials> CheckAddresses(
    const DaemonOptions& options) {
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ranks =
      CredentialsFor(options.address, options.tls, "--address");
  if (!ranks.ok()) return ranks.status();
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> admin =
      CredentialsFor(options.admin_address, options.tls, "--admin_address");
  if (!admin.ok()) return admin.status();
  if (options.tls.any() && !UnixPath(options.address).empty() &&
      !UnixPath(options.admin_address).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--tls_cert/--tls_key/--tls_client_ca serve TCP; --address ",
        options.address, " and --admin_address ", options.admin_address,
        " are unix sockets"));
  }
  if (!UnixPath(options.address).empty() &&
      options.admin_address == options.address) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--admin_address ", options.admin_address,
        " must differ from --address: the ranks' socket never serves the "
        "calls that change the cache"));
  }
  return ListenerCredentials{*std::move(ranks), *std::move(admin)};
}

UnixListener::Options SocketOptions(mode_t mode, const std::string& group,
                                    bool group_required,
                                    const std::string& group_flag) {
  UnixListener::Options socket;
  socket.mode = mode;
  socket.group = group;
  socket.group_required = group_required;
  socket.group_flag = group_flag;
  return socket;
}

// The defaults that depend on other options or on the host.
void FillDerivedDefaults(DaemonOptions& options) {
  if (options.index_dir.empty()) {
    options.index_dir = LocalDir{options.local_dir}.index();
  }
  if (options.host_id.empty()) {
    char host[256] = {};
    gethostname(host, sizeof(host) - 1);
    options.host_id = host;
  }
}

}  // namespace

// The daemon's parts, in the order Start builds them (and the reverse of
// the order they are destroyed in). Each step of Start is one method.
struct Daemon::Parts {
  explicit Parts(DaemonOptions o)
      : options(std::move(o)), local_dir{options.local_dir} {}

  absl::Status OpenStores();
  absl::Status OpenIndex();
  absl::Status BuildLockTable();
  // With --coordinator: the etcd client and locks over the file locks.
  absl::Status StartCoordinator(const FileLocksOptions& file_options);
  absl::Status OpenTier();  // and the wake notices
  absl::Status OpenRemoteTier();
  void BuildServices();
  absl::Status StartServers(const ListenerCredentials& credentials);
  // One gRPC server on `address` with `services`, health and reflection.
  absl::StatusOr<std::unique_ptr<grpc::Server>> Serve(
      const std::string& address,
      const std::shared_ptr<grpc::ServerCredentials>& credentials,
      std::initializer_list<grpc::Service*> services,
      UnixListener::Options socket, std::unique_ptr<UnixListener>* listener);
  void StartPeriodicWork();

  // The periodic tasks.
  void Tick(bool watchdog, absl::Duration watchdog_ping);
  void WriteMetrics();

  DaemonOptions options;
  LocalDir local_dir;
  // Who connected to the unix sockets (outlives every part that asks).
  PeerRegistry peers;
  std::unique_ptr<Store> neff_store;
  std::unique_ptr<Store> hlo_store;
  std::unique_ptr<Index> index;
  std::unique_ptr<Catalog> catalog;
  std::unique_ptr<LocalTier> tier;
  std::unique_ptr<WakeNotices> wake_notices;
  std::unique_ptr<Liveness> liveness;
  // The lease files' and access journals' calls on the shared store,
  // counted for the stats.
  std::unique_ptr<CountingEnv> lease_env;
  std::unique_ptr<ExternalLocks> file_locks;
  // With --coordinator (else null): the etcd holder's lease files, and the
  // etcd locks the table uses instead of `file_locks`.
  std::unique_ptr<etcd::EtcdClient> etcd_client;
  std::unique_ptr<ExternalLocks> fenced_locks;
  std::unique_ptr<etcd::EtcdLocks> etcd_locks;
  std::unique_ptr<LockTable> locks;
  std::unique_ptr<StagingQuota> staging_quota;
  std::unique_ptr<Publisher> publisher;
  std::unique_ptr<RemoteTier> remote;  // the S3 tier; null when off
  Telemetry telemetry{options.env};
  HealthService health;
  std::unique_ptr<CompileCacheService> service;
  std::unique_ptr<Maintenance> maintenance;
  std::unique_ptr<GcCoordinator> gc;  // cluster gc (issue 22)
  std::unique_ptr<CacheAdminService> admin;
  // CacheAdmin as the ranks' socket serves it: the mutating calls refused.
  std::unique_ptr<CacheAdminService> ranks_admin;
  CallTracker calls;  // both servers' calls in progress (outlives them)
  std::unique_ptr<grpc::Server> server;        // the ranks' socket
  std::unique_ptr<grpc::Server> admin_server;  // the admin socket
  // The listeners (destroyed before the servers) accept for them.
  std::unique_ptr<UnixListener> ranks_listener;
  std::unique_ptr<UnixListener> admin_listener;
  Scheduler scheduler{kTickInterval, options.env};
  absl::Duration next_watchdog_ping;  // on the monotonic clock
  bool shut_down = false;
};

absl::Status Daemon::Parts::OpenStores() {
  StoreOptions store_options;
  store_options.host_id = options.host_id;
  store_options.failed_ttl = options.failed_ttl;
  store_options.root = options.neff_cache_dir;
  store_options.ns = Namespace::kNeff;
  store_options.env = options.env;
  store_options.on_event = [](const StoreEvent& event) {
    log::EventWithFields(log::Level::kWarning, event.name, event.fields);
  };
  absl::StatusOr<std::unique_ptr<Store>> neff = Store::Open(store_options);
  if (!neff.ok()) return neff.status();
  store_options.root = options.hlo_cache_dir;
  store_options.ns = Namespace::kHlo;
  absl::StatusOr<std::unique_ptr<Store>> hlo = Store::Open(store_options);
  if (!hlo.ok()) return hlo.status();
  neff_store = *std::move(neff);
  hlo_store = *std::move(hlo);
  return absl::OkStatus();
}

absl::Status Daemon::Parts::OpenIndex() {
  absl::StatusOr<std::unique_ptr<Index>> opened =
      Index::Open(options.index_dir);
  if (!opened.ok()) return opened.status();
  index = *std::move(opened);
  catalog = std::make_unique<Catalog>(neff_store.get(), hlo_store.get(),
                                      index.get(), options.env);
  return absl::OkStatus();
}

absl::Status Daemon::Parts::StartCoordinator(
    const FileLocksOptions& file_options) {
  if (options.coordinator.empty()) return absl::OkStatus();
  absl::StatusOr<EtcdCoordinator> started =
      StartEtcdCoordinator(options, file_options, file_locks.get());
  if (!started.ok()) return started.status();
  etcd_client = std::move(started->client);
  fenced_locks = std::move(started->fenced);
  etcd_locks = std::move(started->locks);
  return absl::OkStatus();
}

absl::Status Daemon::Parts::BuildLockTable() {
  liveness = NewProcLiveness(options.host_id);
  FileLocksOptions file_options;
  file_options.locks_dir = local_dir.locks();
  file_options.shared = options.shared_leases;
  file_options.host_id = options.host_id;
  file_options.stale_after = options.lease_ttl;
  file_options.entry_dir = [catalog = catalog.get()](const EntryKey& id) {
    return catalog->StoreFor(id).RecordsDir(id);
  };
  file_options.quarantine_dir = [catalog = catalog.get()](const EntryKey& id) {
    return catalog->StoreFor(id).root() + "/quarantine";
  };
  file_options.poll_interval = options.poll_interval;
  lease_env = std::make_unique<CountingEnv>(options.env);
  file_options.env = options.env;
  file_options.shared_env = lease_env.get();
  file_locks = NewFileLocks(file_options);
  if (absl::Status s = StartCoordinator(file_options); !s.ok()) return s;
  LockTableOptions lock_options;
  lock_options.lease_ttl = options.lease_ttl;
  lock_options.poll_interval = options.poll_interval;
  lock_options.env = options.env;
  lock_options.liveness = liveness.get();
  lock_options.max_leases_per_holder = options.max_leases_per_pid;
  lock_options.max_waiters = options.max_lock_waiters;
  lock_options.external_locks =
      etcd_locks != nullptr ? static_cast<ExternalLocks*>(etcd_locks.get())
                            : file_locks.get();
  lock_options.probe_entry =
      [catalog =
           catalog.get()](const EntryKey& id) -> std::optional<v1::Entry> {
    absl::StatusOr<std::optional<v1::Entry>> found = catalog->Find(id);
    return found.ok() ? *found : std::nullopt;
  };
  locks = std::make_unique<LockTable>(lock_options);
  return absl::OkStatus();
}

absl::Status Daemon::Parts::OpenTier() {
  wake_notices = std::make_unique<WakeNotices>(options.env, local_dir.wake());
  if (absl::Status s = wake_notices->RemoveLeftovers(); !s.ok()) return s;
  if (!options.local_tier) return absl::OkStatus();
  LocalTierOptions tier_options;
  tier_options.dir = local_dir.tier();
  tier_options.capacity_bytes = options.local_tier_bytes;
  tier_options.env = options.env;
  absl::StatusOr<std::unique_ptr<LocalTier>> opened =
      LocalTier::Open(tier_options);
  if (!opened.ok()) return opened.status();
  tier = *std::move(opened);
  return absl::OkStatus();
}

absl::Status Daemon::Parts::OpenRemoteTier() {
  PublisherOptions publisher_options;
  publisher_options.host_id = options.host_id;
  publisher_options.env = options.env;
  staging_quota = std::make_unique<StagingQuota>(
      StagingQuotaOptions{local_dir.staging(), options.staging_quota_per_uid,
                          absl::Hours(1), options.env});
  publisher_options.check_staged =
      [quota = staging_quota.get()](const std::string& path) {
        return quota->Check(path);
      };
  publisher = std::make_unique<Publisher>(publisher_options, catalog.get(),
                                          locks.get(), tier.get());
  if (!options.remote.enabled()) return absl::OkStatus();
  RemoteTierParts remote_parts;
  remote_parts.catalog = catalog.get();
  remote_parts.locks = locks.get();
  remote_parts.publisher = publisher.get();
  remote_parts.tier = tier.get();
  remote_parts.index = index.get();
  remote_parts.staging_dir = local_dir.staging();
  remote_parts.host_id = options.host_id;
  remote_parts.environment = remote::ProcessEnvironment();
  remote_parts.env = options.env;
  absl::StatusOr<std::unique_ptr<RemoteTier>> opened =
      RemoteTier::Open(options.remote, std::move(remote_parts));
  if (!opened.ok()) return opened.status();
  remote = *std::move(opened);
  // An unmodified rank's entry goes up to S3 as a publish does.
  catalog->SetAdoptionObserver(
      [remote = remote.get()](const EntryKey& id, const v1::Entry& entry) {
        std::unique_ptr<PublishIntent> upload = remote->NewUploadIntent();
        if (upload == nullptr) return;
        upload->Begin(id, entry.size(), entry.sha256());
        upload->End(/*stored=*/true);
      });
  return absl::OkStatus();
}

void Daemon::Parts::BuildServices() {
  ServiceOptions service_options;
  service_options.host_id = options.host_id;
  service_options.env = options.env;
  service_options.staging_dir = local_dir.staging();
  service_options.default_lock_timeout = options.lock_timeout;
  service_options.max_entry_bytes = options.max_entry_bytes;
  service_options.max_inline_bytes = options.max_inline_bytes;
  service_options.peers = &peers;
  service_options.ranks_group = options.socket_group;
  service_options.remote = remote.get();
  service_options.wake_notices = wake_notices.get();
  if (etcd_locks != nullptr) {
    service_options.coordinator_stats =
        [etcd = etcd_locks.get()](v1::Stats* stats) {
          FillCoordinatorStats(*etcd, stats);
        };
  }
  service_options.shared_ops = [this] {
    return neff_store->metadata_ops() + hlo_store->metadata_ops() +
           lease_env->metadata_ops();
  };
  service_options.leftovers = [this](absl::Time* measured) {
    return gc->Leftovers(measured);
  };
  service = std::make_unique<CompileCacheService>(
      service_options, catalog.get(), locks.get(), tier.get(), publisher.get(),
      &telemetry);

  MaintenanceOptions maintenance_options;
  maintenance_options.env = options.env;
  maintenance_options.stale_lock_age = options.lock_timeout;
  maintenance_options.recent = options.gc_recent;
  maintenance_options.temp_grace = options.gc_temp_grace;
  maintenance_options.quarantine = {options.gc_quarantine_age,
                                    options.gc_quarantine_bytes};
  maintenance_options.trash = {options.gc_trash_age, options.gc_trash_bytes};
  // `neffctl evict` drops the host's local copy too: otherwise ranks on this
  // host would keep being handed the evicted NEFF until the tier evicts it.
  maintenance_options.on_evict = [tier = tier.get()](const EntryKey& id) {
    if (tier != nullptr) tier->Remove(id);
  };
  maintenance_options.lease_out = [locks = locks.get()](const EntryKey& id) {
    return locks->Held(id);
  };
  maintenance =
      std::make_unique<Maintenance>(maintenance_options, catalog.get());
  // Cluster gc: one evictor per store, recency from every host's journal.
  GcCoordinatorOptions gc_options;
  gc_options.host_id = options.host_id;
  gc_options.locks_dir = local_dir.locks() + "/.gc";
  gc_options.lease_ttl = options.lease_ttl;
  gc_options.max_size_bytes = options.max_cache_size;
  gc_options.interval = options.gc_interval;
  gc_options.journal_grain = options.access_journal_grain;
  gc_options.journal_min_spacing = options.access_journal_spacing;
  gc_options.access_flush_period = kAccessFlushInterval;
  gc_options.shared_env = lease_env.get();
  gc_options.host_locks_dir = local_dir.locks();
  gc_options.host_env = options.env;
  gc = std::make_unique<GcCoordinator>(gc_options, catalog.get(),
                                       maintenance.get());
  catalog->SetAccessObserver(
      [gc = gc.get()](const auto& batch) { gc->NoteAccess(batch); });
  AdminOptions admin_options;
  admin_options.locks = locks.get();
  admin_options.telemetry = &telemetry;
  admin_options.cumulative_stats = [this] {
    return service->CumulativeStats();
  };
  admin_options.set_draining = [this](bool draining) {
    if (draining) {
      locks->Drain();
    } else {
      locks->Undrain();
    }
    health.SetDraining(draining);
  };
  admin_options.config = options.config;
  admin_options.peers = &peers;
  admin_options.remote = remote.get();
  admin_options.locks_dir = local_dir.locks();
  if (etcd_locks != nullptr) {
    admin_options.cluster_holders =
        [etcd = etcd_locks.get()](v1::LocksResponse* response) {
          FillClusterHolders(*etcd, response);
        };
  }
  admin_options.env = options.env;
  admin_options.gc = [gc = gc.get()](Namespace ns,
                                     const v1::GcRequest& request) {
    return gc->RunNow(ns, request);
  };
  admin = std::make_unique<CacheAdminService>(maintenance.get(), catalog.get(),
                                              admin_options);
  admin_options.mutations_only_on = options.admin_address;
  ranks_admin = std::make_unique<CacheAdminService>(
      maintenance.get(), catalog.get(), std::move(admin_options));
}

absl::StatusOr<std::unique_ptr<grpc::Server>> Daemon::Parts::Serve(
    const std::string& address,
    const std::shared_ptr<grpc::ServerCredentials>& credentials,
    std::initializer_list<grpc::Service*> services,
    UnixListener::Options socket, std::unique_ptr<UnixListener>* listener) {
  socket.path = UnixPath(address);
  socket.peers = &peers;
  socket.env = options.env;
  if (!socket.path.empty()) {
    absl::StatusOr<std::unique_ptr<UnixListener>> listening =
        UnixListener::Listen(socket);
    if (!listening.ok()) return listening.status();
    *listener = *std::move(listening);
  }
  grpc::ServerBuilder builder;
  int port = 0;
  // A unix socket's connections are accepted by the listener, which reads
  // who connected (SO_PEERCRED) before gRPC gets them.
  if (socket.path.empty())
    builder.AddListeningPort(address, credentials, &port);
  for (grpc::Service* service : services) builder.RegisterService(service);
  builder.RegisterService(&health);
  ConfigureServer(builder, options.max_inline_bytes + (1 << 20), &calls);
  grpc::ResourceQuota quota("neffd");
  quota.SetMaxThreads(options.max_rpc_threads);
  builder.SetResourceQuota(quota);
  std::unique_ptr<grpc::Server> started = builder.BuildAndStart();
  if (started == nullptr || (socket.path.empty() && port == 0)) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  if (*listener != nullptr) (*listener)->Serve(started.get());
  return started;
}

absl::Status Daemon::Parts::StartServers(
    const ListenerCredentials& credentials) {
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  const bool grouped = !options.admin_group.empty();
  absl::StatusOr<std::unique_ptr<grpc::Server>> admin_started = Serve(
      options.admin_address, credentials.admin, {service.get(), admin.get()},
      SocketOptions(grouped ? 0660 : 0600, options.admin_group, grouped,
                    "--admin_group"),
      &admin_listener);
  if (!admin_started.ok()) return admin_started.status();
  admin_server = *std::move(admin_started);
  // A missing --socket_group leaves the socket to the service user's
  // group: root and that group can still connect, and the operator sees
  // the mode.
  absl::StatusOr<std::unique_ptr<grpc::Server>> ranks_started = Serve(
      options.address, credentials.ranks, {service.get(), ranks_admin.get()},
      SocketOptions(0660, options.socket_group, /*group_required=*/false,
                    "--socket_group"),
      &ranks_listener);
  if (!ranks_started.ok()) return ranks_started.status();
  server = *std::move(ranks_started);
  return absl::OkStatus();
}

void Daemon::Parts::StartPeriodicWork() {
  const absl::Duration watchdog_interval = SystemdWatchdogInterval();
  const bool watchdog = watchdog_interval > absl::ZeroDuration();
  // The lock table's tick and the watchdog share the clock thread, so a
  // wedged lock table stops the pings and gets the daemon restarted.
  scheduler.Add({kTickInterval,
                 [this, watchdog, watchdog_interval] {
                   Tick(watchdog, watchdog_interval / 2);
                 },
                 /*own_thread=*/false, /*first_at_start=*/true});
  scheduler.Add(
      {kAccessFlushInterval, [this] { (void)catalog->FlushAccessTimes(); }});
  scheduler.Add({kStagingSweepInterval, [this] {
                   for (const std::string& name : staging_quota->Sweep()) {
                     log::Warning("staged_file_removed",
                                  {{"file", name},
                                   {"why",
                                    "over --staging_quota_per_uid or "
                                    "older than an hour"}});
                   }
                 }});
  if (!options.metrics_textfile.empty()) {
    WriteMetrics();
    scheduler.Add({options.metrics_interval, [this] { WriteMetrics(); },
                   /*own_thread=*/true});
  }
  if (remote != nullptr) {
    remote->Start();
    // A download may outlast the TTL of the lease it runs under.
    scheduler.Add(
        {options.lease_ttl / 3, [this] { remote->KeepFetchesAlive(); }});
  }
  scheduler.Start();
  // Cluster gc keeps its own threads: a lease on the shared store and runs
  // that may take minutes (daemon/cluster/gc_coordinator.h).
  gc->Start();
}

void Daemon::Parts::Tick(bool watchdog, absl::Duration watchdog_ping) {
  locks->Tick();
  if (watchdog && options.env->MonotonicNow() >= next_watchdog_ping) {
    NotifySystemd("WATCHDOG=1");
    next_watchdog_ping = options.env->MonotonicNow() + watchdog_ping;
  }
}

void Daemon::Parts::WriteMetrics() {
  if (options.metrics_textfile.empty()) return;
  absl::Status written =
      WriteTextfile(options.metrics_textfile,
                    telemetry.RenderPrometheus(service->CumulativeStats()));
  if (!written.ok()) {
    log::Error("metrics_write_failed", {{"path", options.metrics_textfile},
                                        {"error", written.message()}});
  }
}

Daemon::Daemon(std::unique_ptr<Parts> parts) : parts_(std::move(parts)) {}

Daemon::~Daemon() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonOptions options) {
  absl::StatusOr<ListenerCredentials> credentials = CheckAddresses(options);
  if (!credentials.ok()) return credentials.status();
  FillDerivedDefaults(options);
  for (const std::string& address : {options.address, options.admin_address}) {
    if (absl::Status s = PrepareSocketPath(address); !s.ok()) return s;
  }
  auto parts = std::make_unique<Parts>(std::move(options));
  if (absl::Status s =
          PrepareLocalDir(parts->local_dir, parts->options.socket_group);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = parts->OpenStores(); !s.ok()) return s;
  if (absl::Status s = parts->OpenIndex(); !s.ok()) return s;
  if (absl::Status s = parts->BuildLockTable(); !s.ok()) return s;
  if (absl::Status s = parts->OpenTier(); !s.ok()) return s;
  if (absl::Status s = parts->OpenRemoteTier(); !s.ok()) return s;
  parts->BuildServices();
  if (absl::Status s = parts->StartServers(*credentials); !s.ok()) return s;
  parts->StartPeriodicWork();
  return std::unique_ptr<Daemon>(new Daemon(std::move(parts)));
}

std::string Daemon::Describe() const {
  const DaemonOptions& o = parts_->options;
  return absl::StrCat(
      "neffd: listening on ", o.address, ", admin on ", o.admin_address,
      " (host ", o.host_id, "); neff cache ", o.neff_cache_dir, ", hlo cache ",
      o.hlo_cache_dir, ", local dir ", o.local_dir, ", index ", o.index_dir,
      o.remote.enabled() ? absl::StrCat(", remote ", o.remote.url, " (",
                                        o.remote.read_only ? "ro" : "rw", ")")
                         : "");
}

std::string Daemon::IndexRecoveryNote() const {
  const std::string& moved = parts_->index->recovered_from();
  if (moved.empty()) return "";
  return absl::StrCat("neffd: the index at ", parts_->options.index_dir,
                      " could not be opened; moved it to ", moved,
                      " and started a new one (entries are found again in the "
                      "store)");
}

void Daemon::Reload() { parts_->WriteMetrics(); }

void Daemon::Shutdown() {
  Parts* p = parts_.get();
  if (p == nullptr || p->shut_down) return;
  p->shut_down = true;
  p->health.Shutdown();
  p->locks->Shutdown();
  p->service->EndHolds();  // long-lived streams; their leases end with us
  // No new connections; the sockets are removed.
  p->ranks_listener.reset();
  p->admin_listener.reset();
  // The grace is for calls in progress (a publish), not idle connections.
  StopServers({p->server.get(), p->admin_server.get()}, p->calls,
              p->options.shutdown_grace, p->options.env);
  p->scheduler.Stop();
  if (p->remote != nullptr) p->remote->Stop();
  p->gc->Stop();
  (void)p->catalog->FlushAccessTimes();
  (void)p->index->Flush();
  p->WriteMetrics();
}

}  // namespace neffd
