// neffd: the per-host compile-cache daemon. See daemon/service/daemon.h.
//
// Every flag defaults to its environment variable (read through the config
// registry), then to the spec's default, so `neffd` with no flags serves the
// same directories that torch-neuronx ranks on this host use.
#include <signal.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "config/env.h"
#include "daemon/service/daemon.h"

ABSL_FLAG(std::string, address, "",
          "unix:/path or loopback HOST:PORT (default $NEFFD_ADDRESS, else "
          "unix:/run/neffd/neffd.sock)");
ABSL_FLAG(std::string, cache_dir, "",
          "NEFF cache root (default $TORCH_NEURONX_NEFF_CACHE_DIR)");
ABSL_FLAG(std::string, hlo_cache_dir, "",
          "HLO cache root (default $TORCH_NEURONX_HLO_CACHE_DIR)");
ABSL_FLAG(std::string, local_dir, "",
          "local lock and scratch dir (default "
          "$TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR); must be a local filesystem");
ABSL_FLAG(std::string, index_dir, "",
          "RocksDB index (default {local_dir}/index)");
ABSL_FLAG(int64_t, lock_timeout, -1,
          "seconds a Lock waits by default (default "
          "$TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT)");
ABSL_FLAG(int64_t, lease_ttl, 30, "seconds a lease lives without a KeepAlive");
ABSL_FLAG(int64_t, failed_ttl, 3600,
          "seconds a recorded compile failure is served before a retry");
ABSL_FLAG(int64_t, shutdown_grace, 10,
          "seconds in-flight calls get to finish on SIGTERM");
ABSL_FLAG(double, poll_interval, 1.0,
          "seconds between checks of a key another host is compiling");
ABSL_FLAG(bool, shared_leases, true,
          "take cross-host lease files on the shared store");
ABSL_FLAG(int64_t, gc_recent_seconds, 60,
          "gc never removes an entry served on this host this recently");
ABSL_FLAG(std::string, max_cache_size, "0",
          "run gc every --gc_interval seconds to keep the neff store under "
          "this many bytes (0: off)");
ABSL_FLAG(int64_t, gc_interval, 600, "seconds between periodic gc runs");
ABSL_FLAG(bool, local_tier, true,
          "serve neff entries from a verified copy in {local_dir}/tier");
ABSL_FLAG(std::string, local_tier_bytes, "0",
          "local tier capacity in bytes (0: 20% of the local filesystem)");
ABSL_FLAG(std::string, host_id, "", "this host's name (default: hostname)");
ABSL_FLAG(std::string, socket_group, "neuron",
          "group that owns the unix socket (mode 0660) when it exists");

namespace {

constexpr int kExitBadConfig = 2;

std::string FlagOr(const std::string& flag,
                   const neffd::config::EnvSnapshot& env,
                   absl::string_view variable) {
  return flag.empty() ? env.GetString(variable) : flag;
}

int Fail(int code, absl::string_view message) {
  std::fprintf(stderr, "neffd: %s\n", std::string(message).c_str());
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "neffd [flags]: serve the per-host NEFF/HLO compile cache");
  // Debian's absl is built without NDEBUG, which makes every Mutex lock run
  // the deadlock detector (~25 ns each); the daemon's locks are ordered by
  // design, so skip it as a release build of absl would.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    return Fail(kExitBadConfig,
                absl::StrCat("unexpected argument '", rest[1], "'"));
  }
  const neffd::config::EnvSnapshot env =
      neffd::config::EnvSnapshot::FromProcessEnvironment();
  for (const std::string& warning : env.warnings()) {
    std::fprintf(stderr, "neffd: warning: %s\n", warning.c_str());
  }

  neffd::DaemonOptions options;
  options.address = FlagOr(absl::GetFlag(FLAGS_address), env, "NEFFD_ADDRESS");
  options.neff_cache_dir = FlagOr(absl::GetFlag(FLAGS_cache_dir), env,
                                  "TORCH_NEURONX_NEFF_CACHE_DIR");
  options.hlo_cache_dir = FlagOr(absl::GetFlag(FLAGS_hlo_cache_dir), env,
                                 "TORCH_NEURONX_HLO_CACHE_DIR");
  options.local_dir = FlagOr(absl::GetFlag(FLAGS_local_dir), env,
                             "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR");
  options.index_dir = absl::GetFlag(FLAGS_index_dir);
  options.host_id = absl::GetFlag(FLAGS_host_id);
  options.socket_group = absl::GetFlag(FLAGS_socket_group);
  const int64_t lock_timeout =
      absl::GetFlag(FLAGS_lock_timeout) >= 0
          ? absl::GetFlag(FLAGS_lock_timeout)
          : env.GetInt("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT");
  for (auto [name, value] :
       {std::pair<const char*, int64_t>{"lease_ttl",
                                        absl::GetFlag(FLAGS_lease_ttl)},
        {"failed_ttl", absl::GetFlag(FLAGS_failed_ttl)},
        {"shutdown_grace", absl::GetFlag(FLAGS_shutdown_grace)}}) {
    if (value < 0 || (value == 0 && std::string(name) == "lease_ttl")) {
      return Fail(kExitBadConfig, absl::StrCat("--", name, "=", value,
                                               " must be a positive number "
                                               "of seconds"));
    }
  }
  options.lock_timeout = absl::Seconds(lock_timeout);
  options.lease_ttl = absl::Seconds(absl::GetFlag(FLAGS_lease_ttl));
  options.failed_ttl = absl::Seconds(absl::GetFlag(FLAGS_failed_ttl));
  options.shutdown_grace = absl::Seconds(absl::GetFlag(FLAGS_shutdown_grace));
  if (!(absl::GetFlag(FLAGS_poll_interval) > 0)) {
    return Fail(kExitBadConfig,
                "--poll_interval must be a positive number of "
                "seconds");
  }
  options.poll_interval = absl::Seconds(absl::GetFlag(FLAGS_poll_interval));
  options.shared_leases = absl::GetFlag(FLAGS_shared_leases);
  options.gc_recent = absl::Seconds(absl::GetFlag(FLAGS_gc_recent_seconds));
  if (!absl::SimpleAtoi(absl::GetFlag(FLAGS_max_cache_size),
                        &options.max_cache_size) ||
      absl::GetFlag(FLAGS_gc_interval) <= 0) {
    return Fail(kExitBadConfig,
                "--max_cache_size must be a number of bytes and "
                "--gc_interval a positive number of seconds");
  }
  options.gc_interval = absl::Seconds(absl::GetFlag(FLAGS_gc_interval));
  options.local_tier = absl::GetFlag(FLAGS_local_tier);
  if (!absl::SimpleAtoi(absl::GetFlag(FLAGS_local_tier_bytes),
                        &options.local_tier_bytes)) {
    return Fail(kExitBadConfig, "--local_tier_bytes must be a number of bytes");
  }

  // Block the stop signals before any thread starts so only sigwait sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);

  absl::StatusOr<std::unique_ptr<neffd::Daemon>> daemon =
      neffd::Daemon::Start(options);
  if (!daemon.ok()) {
    const bool config_error = absl::IsInvalidArgument(daemon.status()) ||
                              absl::IsFailedPrecondition(daemon.status()) ||
                              absl::IsAlreadyExists(daemon.status()) ||
                              absl::IsPermissionDenied(daemon.status());
    return Fail(config_error ? kExitBadConfig : 1, daemon.status().message());
  }
  if (std::string note = (*daemon)->IndexRecoveryNote(); !note.empty()) {
    std::fprintf(stderr, "%s\n", note.c_str());
  }
  std::printf("%s\n", (*daemon)->Describe().c_str());
  std::fflush(stdout);

  int signal_number = 0;
  sigwait(&stop, &signal_number);
  std::fprintf(stderr, "neffd: %s received; draining\n",
               signal_number == SIGTERM ? "SIGTERM" : "SIGINT");
  (*daemon)->Shutdown();
  std::fprintf(stderr, "neffd: stopped\n");
  return 0;
}
