// daemon/runtime/daemon.h
//
// Daemon assembles one neffd: it checks the directories (the local dir must be
// on a local filesystem, daemon/runtime/local_dir.h), opens the stores, the
// index and the lock table, serves CompileCache, CacheAdmin,
// grpc.health.v1.Health and server reflection on one address, and runs the
// periodic work (the lock table's clock, access-time flushes, metrics) from one
// Scheduler (daemon/runtime/scheduler.h) and cluster gc from its GcCoordinator.
// Start() returns once the server accepts calls; Shutdown() drains it (health
// NOT_SERVING, waiters told to retry, in-flight calls finish within the grace
// period), flushes the index and removes the socket.
//
// With `metrics_textfile` set, the Prometheus text exposition is written
// there atomically every `metrics_interval` and on Reload(). While systemd's
// watchdog is on (WATCHDOG_USEC), the lock table's tick pings it, so a
// wedged lock table gets the daemon restarted.
//
// It listens on two addresses (daemon/server/listeners.h): the ranks'
// socket `address` ("unix:/abs/path", created 0660, group `socket_group`
// when that group exists) serves CompileCache, the read-only operator calls,
// health and reflection; the admin socket `admin_address` (0600, or 0660 in
// `admin_group`) serves every operator call too. TCP is served on loopback,
// or anywhere with mutual TLS.
//
// Start, Shutdown and the destructor must not race; everything else in the
// daemon runs on gRPC's threads and the scheduler's.
#ifndef NEFFD_DAEMON_RUNTIME_DAEMON_H_
#define NEFFD_DAEMON_RUNTIME_DAEMON_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "config/defaults.h"
#include "daemon/remote_tier/remote_tier_options.h"
#include "daemon/server/listeners.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "store/env.h"

namespace neffd {

struct DaemonOptions {
  std::string address = "unix:/run/neffd/neffd.sock";
  std::string neff_cache_dir = "/tmp/neff_cache";
  std::string hlo_cache_dir = "/tmp/hlo_cache";
  std::string local_dir = "/tmp/local_cache";
  std::string index_dir;  // default {local_dir}/index
  std::string host_id;
  std::string socket_group = "neuron";
  // The operators' socket: the calls neffd.proto marks admin_only (those
  // that change the cache) are served only here.
  std::string admin_address = "unix:/run/neffd/admin.sock";
  // Empty: the admin socket is 0600 (the service user only); else 0660 in
  // this group, which must exist.
  std::string admin_group;
  absl::Duration lock_timeout = config::kLockTimeout;
  absl::Duration lease_ttl = absl::Seconds(30);
  absl::Duration failed_ttl = config::kFailedTtl;
  absl::Duration shutdown_grace = absl::Seconds(10);
  // How often a key another host (or a daemon-less process) holds is
  // re-checked; one probe per key per interval for the whole host.
  absl::Duration poll_interval = absl::Seconds(1);
  // Take cross-host lease files on the shared store (docs/ARCHITECTURE.md,
  // "Cross-host leases").
  bool shared_leases = true;
  // Cross-host coordination on etcd: "etcd://HOST:PORT[,HOST:PORT...]"
  // (docs/ARCHITECTURE.md, "Coordination on etcd"); empty: lease files only.
  std::string coordinator;
  // Its connection and this daemon's etcd lease (etcd.endpoints is derived
  // from `coordinator`).
  struct EtcdSettings {
    // etcd grants at least its minimum, 1.5 election timeouts rounded up
    // to seconds (2 s at its defaults, 1 s with --election-timeout=500).
    absl::Duration lease_ttl = absl::Seconds(1);
    absl::Duration call_timeout = absl::Seconds(2);
    std::string ca, cert, key;
  } etcd;
  // gc never removes an entry served on this host this recently.
  absl::Duration gc_recent = absl::Minutes(1);
  // Serve neff entries from a verified copy in {local_dir}/tier, at most
  // this many bytes (0: 20% of the local filesystem).
  bool local_tier = true;
  uint64_t local_tier_bytes = 0;
  // Periodic gc of the neff store down to this size (0: off), every
  // gc_interval.
  uint64_t max_cache_size = 0;
  absl::Duration gc_interval = absl::Minutes(10);
  // Every gc run's bounds on what is not an entry: temp files of crashed
  // publishes older than gc_temp_grace, quarantine/ and .trash/ by age and
  // size (0 bytes: no size bound).
  absl::Duration gc_temp_grace = config::kTempGrace;
  absl::Duration gc_quarantine_age = config::kQuarantineAge;
  uint64_t gc_quarantine_bytes = config::kQuarantineBytes;
  absl::Duration gc_trash_age = config::kTrashAge;
  uint64_t gc_trash_bytes = config::kTrashBytes;
  // Cluster gc: how coarsely (and at most how often) this host records on
  // the shared store which entries it served (daemon/cluster/access_journal.h).
  absl::Duration access_journal_grain = absl::Minutes(10);
  absl::Duration access_journal_spacing = absl::Seconds(10);
  uint64_t max_entry_bytes = config::kMaxEntryBytes;
  // Bytes one uid may have in {local_dir}/staging (0: no limit); checked at
  // each publish and swept every minute (daemon/publish/staging_quota.h).
  uint64_t staging_quota_per_uid = uint64_t{64} << 30;
  uint64_t max_inline_bytes = uint64_t{16} << 20;
  std::string metrics_textfile;  // empty: none
  absl::Duration metrics_interval = absl::Seconds(15);
  // What GetConfig reports (main fills it from the flags and the registry).
  v1::ConfigResponse config;
  // Leases one client process (host, pid) may hold at once; 0: no limit.
  int max_leases_per_pid = 256;
  // Lock calls parked at once across all clients (0: no limit); more are
  // answered RESOURCE_EXHAUSTED at once. 128 ranks x a few keys each.
  int max_lock_waiters = 4096;
  // gRPC threads serving the synchronous calls (everything but Lookup and
  // Lock, which use the callback API). A call that finds all of them busy is
  // answered RESOURCE_EXHAUSTED by gRPC instead of queueing without bound.
  int max_rpc_threads = 512;
  // PEM files; with all three set, TCP is served with mutual TLS (a client
  // certificate signed by tls.client_ca is required) and may listen on a
  // non-loopback address.
  TlsFiles tls;
  // The S3 tier behind the shared store (off unless remote.url is set).
  RemoteTierOptions remote;
  // The filesystem and clock of the stores, the tier and the lock files
  // (store/env.h); not owned. Tests wrap it to inject faults.
  Env* env = Env::Default();
};

class Daemon {
 public:
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(DaemonOptions options);
  ~Daemon();

  // One line for the operator: where it listens and which dirs it uses.
  std::string Describe() const;
  // A line to log once if the index had to be rebuilt, else empty.
  std::string IndexRecoveryNote() const;

  // SIGHUP: writes the metrics file now (re-creating it if it was removed).
  void Reload();

  void Shutdown();

 private:
  struct Parts;
  explicit Daemon(std::unique_ptr<Parts> parts);
  std::unique_ptr<Parts> parts_;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_RUNTIME_DAEMON_H_
