// neffd: the per-host compile-cache daemon. See daemon/service/daemon.h.
//
// Every flag defaults to its environment variable (read through the config
// registry), then to the spec's default, so `neffd` with no flags serves the
// same directories that torch-neuronx ranks on this host use.
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "config/env.h"
#include "daemon/log/log.h"
#include "daemon/service/daemon.h"
#include "systemd/sd-daemon.h"

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
ABSL_FLAG(double, access_journal_grain, 600,
          "cluster gc: seconds by which this host's record of serving an "
          "entry ({cache_dir}/.access/{host_id}) may lag");
ABSL_FLAG(double, access_journal_spacing, 10,
          "cluster gc: least seconds between rewrites of this host's access "
          "journal");
ABSL_FLAG(bool, local_tier, true,
          "serve neff entries from a verified copy in {local_dir}/tier");
ABSL_FLAG(std::string, local_tier_bytes, "0",
          "local tier capacity in bytes (0: 20% of the local filesystem)");
ABSL_FLAG(std::string, host_id, "", "this host's name (default: hostname)");
ABSL_FLAG(std::string, socket_group, "neuron",
          "group that owns the unix socket (mode 0660) when it exists");
ABSL_FLAG(std::string, metrics_textfile, "",
          "write Prometheus metrics here atomically (node_exporter textfile "
          "collector), e.g. /var/lib/node_exporter/textfile/neffd.prom");
ABSL_FLAG(int64_t, metrics_interval, 15,
          "seconds between metrics textfile writes");
ABSL_FLAG(int, v, -1,
          "log verbosity 0-3 (error, warning, info, debug); default "
          "$TORCH_NEURONX_LOG_LEVEL");
ABSL_FLAG(std::string, env_file, "/etc/neffd/neffd.env",
          "re-read on SIGHUP for TORCH_NEURONX_LOG_LEVEL (systemd's "
          "EnvironmentFile)");
ABSL_FLAG(std::string, max_entry_bytes, "8589934592",
          "largest entry a client may publish, in bytes");
ABSL_FLAG(std::string, max_inline_bytes, "16777216",
          "largest entry a client may publish inline (hlo), in bytes");
ABSL_FLAG(int64_t, max_leases_per_pid, 256,
          "leases one client process may hold at once (0: no limit)");
ABSL_FLAG(int64_t, max_lock_waiters, 4096,
          "Lock calls that may wait at once across all clients; more get "
          "RESOURCE_EXHAUSTED at once (0: no limit)");
ABSL_FLAG(int64_t, max_rpc_threads, 512,
          "threads serving the synchronous calls (Publish, KeepAlive, "
          "Unlock, GetStats, admin, health); a call finding all busy gets "
          "RESOURCE_EXHAUSTED "
          "(at least 2)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain; with --tls_key, serve TCP over TLS (needed "
          "for a non-loopback --address)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls_cert");

namespace {

constexpr int kExitBadConfig = 2;

std::string FlagOr(const std::string& flag,
                   const neffd::config::EnvSnapshot& env,
                   absl::string_view variable) {
  return flag.empty() ? env.GetString(variable) : flag;
}

int Fail(int code, absl::string_view message) {
  // One line a person can act on; "<3>" makes it an error in the journal.
  std::fprintf(stderr, "%sneffd: %s\n", neffd::log::UnderJournal() ? "<3>" : "",
               std::string(message).c_str());
  return code;
}

// TORCH_NEURONX_LOG_LEVEL as set in systemd's EnvironmentFile `path`
// (KEY=VALUE lines, '#'/';' comments, optional quotes), or -1.
int LogLevelFromEnvFile(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  int level = -1;
  while (std::getline(in, line)) {
    absl::string_view l = absl::StripAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&l, "TORCH_NEURONX_LOG_LEVEL=")) continue;
    std::string value(absl::StripAsciiWhitespace(l));
    if (value.size() >= 2 && (value[0] == '"' || value[0] == '\'')) {
      value = value.substr(1, value.size() - 2);
    }
    const neffd::config::EnvSnapshot file = neffd::config::EnvSnapshot::FromMap(
        {{"TORCH_NEURONX_LOG_LEVEL", value}});
    if (file.origin("TORCH_NEURONX_LOG_LEVEL") == neffd::config::Origin::kEnv) {
      level = static_cast<int>(file.GetInt("TORCH_NEURONX_LOG_LEVEL"));
    }
  }
  return level;
}

// The log verbosity: --v, else the env file (on SIGHUP), else the
// environment.
int Verbosity(const neffd::config::EnvSnapshot& env, bool reread_file) {
  if (absl::GetFlag(FLAGS_v) >= 0) return absl::GetFlag(FLAGS_v);
  if (reread_file) {
    const int from_file = LogLevelFromEnvFile(absl::GetFlag(FLAGS_env_file));
    if (from_file >= 0) return from_file;
  }
  return static_cast<int>(env.GetInt("TORCH_NEURONX_LOG_LEVEL"));
}

neffd::v1::ConfigValue* AddSetting(neffd::v1::ConfigResponse* config,
                                   const std::string& name,
                                   const std::string& value,
                                   const neffd::config::EnvSnapshot& env,
                                   absl::string_view variable) {
  neffd::v1::ConfigValue* out = config->add_settings();
  out->set_name(name);
  out->set_value(value);
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  if (flag != nullptr && flag->CurrentValue() != flag->DefaultValue()) {
    out->set_origin("flag");
  } else if (!variable.empty() &&
             env.origin(variable) == neffd::config::Origin::kEnv) {
    out->set_origin("env");
    out->set_note(absl::StrCat("from ", variable));
  } else {
    out->set_origin("default");
  }
  return out;
}

// GetConfig's answer: the daemon's settings and the variables it reads.
neffd::v1::ConfigResponse DescribeConfig(const neffd::DaemonOptions& o,
                                         const neffd::config::EnvSnapshot& env,
                                         int verbosity) {
  neffd::v1::ConfigResponse config;
  const std::pair<std::string, std::pair<std::string, const char*>> rows[] = {
      {"address", {o.address, "NEFFD_ADDRESS"}},
      {"cache_dir", {o.neff_cache_dir, "TORCH_NEURONX_NEFF_CACHE_DIR"}},
      {"hlo_cache_dir", {o.hlo_cache_dir, "TORCH_NEURONX_HLO_CACHE_DIR"}},
      {"local_dir", {o.local_dir, "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR"}},
      {"index_dir",
       {o.index_dir.empty() ? o.local_dir + "/index" : o.index_dir, ""}},
      {"lock_timeout",
       {absl::FormatDuration(o.lock_timeout),
        "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"}},
      {"lease_ttl", {absl::FormatDuration(o.lease_ttl), ""}},
      {"failed_ttl", {absl::FormatDuration(o.failed_ttl), ""}},
      {"shutdown_grace", {absl::FormatDuration(o.shutdown_grace), ""}},
      {"poll_interval", {absl::FormatDuration(o.poll_interval), ""}},
      {"shared_leases", {o.shared_leases ? "true" : "false", ""}},
      {"gc_recent_seconds", {absl::FormatDuration(o.gc_recent), ""}},
      {"max_cache_size", {absl::StrCat(o.max_cache_size), ""}},
      {"gc_interval", {absl::FormatDuration(o.gc_interval), ""}},
      {"access_journal_grain",
       {absl::FormatDuration(o.access_journal_grain), ""}},
      {"access_journal_spacing",
       {absl::FormatDuration(o.access_journal_spacing), ""}},
      {"host_id", {o.host_id.empty() ? "(hostname)" : o.host_id, ""}},
      {"socket_group", {o.socket_group, ""}},
      {"local_tier", {o.local_tier ? "true" : "false", ""}},
      {"local_tier_bytes", {absl::StrCat(o.local_tier_bytes), ""}},
      {"metrics_textfile", {o.metrics_textfile, ""}},
      {"metrics_interval", {absl::FormatDuration(o.metrics_interval), ""}},
      {"max_leases_per_pid", {absl::StrCat(o.max_leases_per_pid), ""}},
      {"max_lock_waiters", {absl::StrCat(o.max_lock_waiters), ""}},
      {"max_rpc_threads", {absl::StrCat(o.max_rpc_threads), ""}},
      {"v", {absl::StrCat(verbosity), "TORCH_NEURONX_LOG_LEVEL"}},
  };
  for (const auto& [name, value] : rows) {
    AddSetting(&config, name, value.first, env, value.second);
  }
  for (const neffd::config::VarSpec& spec : neffd::config::Variables()) {
    if ((spec.readers & neffd::config::kDaemon) == 0) continue;
    neffd::v1::ConfigValue* v = config.add_variables();
    v->set_name(spec.name);
    v->set_value(env.FormatValue(spec.name));
    v->set_origin(
        std::string(neffd::config::OriginName(env.origin(spec.name))));
    v->set_note(env.note(spec.name));
  }
  for (const std::string& w : env.warnings()) config.add_warnings(w);
  return config;
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
  neffd::log::Configure(Verbosity(env, false), env.IsSet("JOURNAL_STREAM"));
  for (const std::string& warning : env.warnings()) {
    neffd::log::Warning("config", {{"warning", warning}});
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
  if (absl::GetFlag(FLAGS_access_journal_grain) <= 0 ||
      absl::GetFlag(FLAGS_access_journal_spacing) <= 0) {
    return Fail(kExitBadConfig,
                "--access_journal_grain and --access_journal_spacing must be "
                "positive numbers of seconds");
  }
  options.access_journal_grain =
      absl::Seconds(absl::GetFlag(FLAGS_access_journal_grain));
  options.access_journal_spacing =
      absl::Seconds(absl::GetFlag(FLAGS_access_journal_spacing));
  if (!absl::SimpleAtoi(absl::GetFlag(FLAGS_max_entry_bytes),
                        &options.max_entry_bytes) ||
      !absl::SimpleAtoi(absl::GetFlag(FLAGS_max_inline_bytes),
                        &options.max_inline_bytes) ||
      options.max_inline_bytes > (uint64_t{1} << 30) ||
      absl::GetFlag(FLAGS_max_leases_per_pid) < 0 ||
      absl::GetFlag(FLAGS_max_leases_per_pid) > (1 << 30)) {
    return Fail(kExitBadConfig,
                "--max_entry_bytes must be a number of bytes, "
                "--max_inline_bytes at most 1073741824 and "
                "--max_leases_per_pid a count >= 0");
  }
  options.max_leases_per_pid =
      static_cast<int>(absl::GetFlag(FLAGS_max_leases_per_pid));
  if (absl::GetFlag(FLAGS_max_lock_waiters) < 0 ||
      absl::GetFlag(FLAGS_max_lock_waiters) > (1 << 30) ||
      absl::GetFlag(FLAGS_max_rpc_threads) < 2 ||
      absl::GetFlag(FLAGS_max_rpc_threads) > (1 << 20)) {
    // gRPC needs one thread polling for calls while another serves one.
    return Fail(kExitBadConfig,
                "--max_lock_waiters must be a count >= 0 and "
                "--max_rpc_threads a count >= 2");
  }
  options.max_lock_waiters =
      static_cast<int>(absl::GetFlag(FLAGS_max_lock_waiters));
  options.max_rpc_threads =
      static_cast<int>(absl::GetFlag(FLAGS_max_rpc_threads));
  options.tls_cert = absl::GetFlag(FLAGS_tls_cert);
  options.tls_key = absl::GetFlag(FLAGS_tls_key);
  options.local_tier = absl::GetFlag(FLAGS_local_tier);
  if (!absl::SimpleAtoi(absl::GetFlag(FLAGS_local_tier_bytes),
                        &options.local_tier_bytes)) {
    return Fail(kExitBadConfig, "--local_tier_bytes must be a number of bytes");
  }
  options.metrics_textfile = absl::GetFlag(FLAGS_metrics_textfile);
  if (absl::GetFlag(FLAGS_metrics_interval) <= 0) {
    return Fail(kExitBadConfig,
                "--metrics_interval must be a positive number of seconds");
  }
  if (!options.metrics_textfile.empty() && options.metrics_textfile[0] != '/') {
    return Fail(kExitBadConfig, "--metrics_textfile must be an absolute path");
  }
  options.metrics_interval =
      absl::Seconds(absl::GetFlag(FLAGS_metrics_interval));
  options.config = DescribeConfig(options, env, neffd::log::Verbosity());

  // Block the stop signals before any thread starts so only sigwait sees them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);
  // Every client connection is an fd; the default soft limit (1024) would
  // make gRPC stop accepting, and clients hang, long before the caps above
  // refuse anything. The hard limit is the operator's (LimitNOFILE).
  struct rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 &&
      files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

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
    neffd::log::Warning("index_recovered", {{"note", note}});
  }
  std::printf("%s\n", (*daemon)->Describe().c_str());
  std::fflush(stdout);
  neffd::log::Info("started", {{"address", options.address},
                               {"cache_dir", options.neff_cache_dir},
                               {"local_dir", options.local_dir}});
  sd_notify(0, "READY=1\nSTATUS=serving");

  int signal_number = 0;
  for (;;) {
    sigwait(&stop, &signal_number);
    if (signal_number != SIGHUP) break;
    neffd::log::Configure(Verbosity(env, true), env.IsSet("JOURNAL_STREAM"));
    (*daemon)->Reload();
    neffd::log::Warning("reloaded", {{"v", neffd::log::Verbosity()}});
  }
  sd_notify(0, "STOPPING=1\nSTATUS=draining");
  neffd::log::Warning(
      "draining",
      {{"signal", signal_number == SIGTERM ? "SIGTERM" : "SIGINT"}});
  (*daemon)->Shutdown();
  neffd::log::Warning("stopped");
  return 0;
}
