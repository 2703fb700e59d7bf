#include "daemon/flags.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "config/defaults.h"
#include "config/flags.h"
#include "config/version.h"
#include "daemon/log/log.h"
#include "daemon/s3/remote_layout.h"
#include "daemon/s3/s3_client.h"
#include "proto/admin_only.h"

using neffd::config::ByteSizeFlag;
using neffd::config::DurationFlag;
using neffd::config::LogLevelFlag;

ABSL_FLAG(std::string, address, "",
          "the ranks' socket (CompileCache, read-only operator calls): "
          "unix:/path or loopback HOST:PORT (any HOST:PORT with mutual TLS)");
ABSL_FLAG(std::string, admin_address, "",
          "the operators' socket, the only one serving the calls that change "
          "the cache (listed below)");
ABSL_FLAG(std::string, admin_group, "",
          "group that may use the admin socket (mode 0660; must exist); "
          "empty: mode 0600, the service user only");
ABSL_FLAG(std::string, cache_dir, "", "NEFF cache root");
ABSL_FLAG(std::string, hlo_cache_dir, "", "HLO cache root");
ABSL_FLAG(std::string, local_dir, "",
          "local lock and scratch dir; must be a local filesystem");
ABSL_FLAG(std::string, index_dir, "",
          "RocksDB index (empty: {local_dir}/index)");
ABSL_FLAG(std::optional<DurationFlag>, lock_timeout, std::nullopt,
          "how long a Lock waits when the request gives no wait");
ABSL_FLAG(DurationFlag, lease_ttl, DurationFlag{absl::Seconds(30)},
          "how long a lease lives without a KeepAlive");
ABSL_FLAG(DurationFlag, failed_ttl, DurationFlag{neffd::config::kFailedTtl},
          "how long a recorded compile failure is served before a retry");
ABSL_FLAG(DurationFlag, shutdown_grace, DurationFlag{absl::Seconds(10)},
          "how long in-flight calls get to finish on SIGTERM");
ABSL_FLAG(DurationFlag, poll_interval, DurationFlag{absl::Seconds(1)},
          "time between checks of a key another host is compiling");
ABSL_FLAG(bool, shared_leases, true,
          "take cross-host lease files on the shared store");
ABSL_FLAG(DurationFlag, gc_recent_seconds, DurationFlag{absl::Minutes(1)},
          "gc never removes an entry served on this host this recently");
ABSL_FLAG(ByteSizeFlag, max_cache_size, ByteSizeFlag{0},
          "run gc every --gc_interval to keep the neff store under this many "
          "bytes (0: no size goal; gc still sweeps leftovers)");
ABSL_FLAG(DurationFlag, gc_interval, DurationFlag{absl::Minutes(10)},
          "time between periodic gc runs (each sweeps both stores' "
          "leftovers)");
ABSL_FLAG(DurationFlag, gc_temp_grace, DurationFlag{neffd::config::kTempGrace},
          "gc removes temp files of crashed publishes (.{key}.neff.tmp.*) "
          "older than this");
ABSL_FLAG(DurationFlag, gc_quarantine_age,
          DurationFlag{neffd::config::kQuarantineAge},
          "gc removes quarantined entries older than this");
ABSL_FLAG(ByteSizeFlag, gc_quarantine_bytes,
          ByteSizeFlag{neffd::config::kQuarantineBytes},
          "gc keeps {cache_dir}/quarantine within this many bytes, oldest "
          "removed first (0: no size bound)");
ABSL_FLAG(DurationFlag, gc_trash_age, DurationFlag{neffd::config::kTrashAge},
          "gc removes what removed entries left in {cache_dir}/.trash after "
          "this long");
ABSL_FLAG(ByteSizeFlag, gc_trash_bytes,
          ByteSizeFlag{neffd::config::kTrashBytes},
          "gc keeps {cache_dir}/.trash within this many bytes, oldest removed "
          "first (0: no size bound)");
ABSL_FLAG(DurationFlag, access_journal_grain, DurationFlag{absl::Minutes(10)},
          "cluster gc: how far this host's record of serving an entry "
          "({cache_dir}/.access/{host_id}) may lag");
ABSL_FLAG(DurationFlag, access_journal_spacing, DurationFlag{absl::Seconds(10)},
          "cluster gc: least time between rewrites of this host's access "
          "journal");
ABSL_FLAG(bool, local_tier, true,
          "serve neff entries from a verified copy in {local_dir}/tier");
ABSL_FLAG(ByteSizeFlag, local_tier_bytes, ByteSizeFlag{0},
          "local tier capacity in bytes (0: 20% of the local filesystem)");
ABSL_FLAG(std::string, host_id, "", "this host's name (empty: hostname)");
ABSL_FLAG(std::string, socket_group, "neuron",
          "group that owns the unix socket (mode 0660) when it exists");
ABSL_FLAG(std::string, metrics_textfile, "",
          "write Prometheus metrics here atomically (node_exporter textfile "
          "collector), e.g. /var/lib/node_exporter/textfile/neffd.prom");
ABSL_FLAG(DurationFlag, metrics_interval, DurationFlag{absl::Seconds(15)},
          "time between metrics textfile writes");
ABSL_FLAG(std::optional<LogLevelFlag>, v, std::nullopt,
          "log verbosity: 0 error, 1 warning, 2 info, 3 debug (or the name)");
ABSL_FLAG(std::string, env_file, "/etc/neffd/neffd.env",
          "re-read on SIGHUP for TORCH_NEURONX_LOG_LEVEL (systemd's "
          "EnvironmentFile)");
ABSL_FLAG(ByteSizeFlag, max_entry_bytes,
          ByteSizeFlag{neffd::config::kMaxEntryBytes},
          "largest entry a client may publish, in bytes");
ABSL_FLAG(ByteSizeFlag, max_inline_bytes, ByteSizeFlag{uint64_t{16} << 20},
          "largest entry a client may publish inline (hlo), in bytes; at "
          "most 1073741824");
ABSL_FLAG(ByteSizeFlag, staging_quota_per_uid, ByteSizeFlag{uint64_t{64} << 30},
          "bytes one user's ranks may have staged in {local_dir}/staging "
          "at once; a publish over it is refused, and the oldest files over "
          "it are removed every minute (0: no limit)");
ABSL_FLAG(int64_t, max_leases_per_pid, 256,
          "leases one client process may hold at once (0: no limit)");
ABSL_FLAG(int64_t, max_lock_waiters, 4096,
          "Lock calls that may wait at once across all clients; more get "
          "RESOURCE_EXHAUSTED at once (0: no limit)");
ABSL_FLAG(int64_t, max_rpc_threads, 512,
          "threads serving the synchronous calls (Publish, KeepAlive, Unlock, "
          "GetStats, admin, health); a call finding all busy gets "
          "RESOURCE_EXHAUSTED (at least 2)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain; with --tls_key and --tls_client_ca, serve "
          "TCP over mutual TLS (needed for a non-loopback address)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls_cert");
ABSL_FLAG(std::string, tls_client_ca, "",
          "PEM CA certificate(s); TCP clients must present a certificate "
          "signed by one of them");
ABSL_FLAG(std::string, remote, "",
          "S3 tier behind the shared store, s3://BUCKET/PREFIX (empty: off)");
ABSL_FLAG(std::string, s3_endpoint, "",
          "S3 endpoint URL for S3-compatible stores (empty: AWS's regional "
          "endpoint)");
ABSL_FLAG(std::string, s3_region, "",
          "S3 signing region (empty: AWS_REGION, AWS_DEFAULT_REGION, else "
          "us-east-1)");
ABSL_FLAG(std::string, remote_mode, "",
          "rw: read through and upload; ro: read through only (empty: rw)");
ABSL_FLAG(DurationFlag, s3_connect_timeout, DurationFlag{absl::Seconds(2)},
          "deadline for connecting to S3");
ABSL_FLAG(DurationFlag, s3_timeout, DurationFlag{absl::Seconds(60)},
          "deadline for one S3 request (a whole GET, one upload part)");
ABSL_FLAG(DurationFlag, s3_lookup_timeout, DurationFlag{absl::Seconds(2)},
          "deadline for the model.done GET a miss makes before anyone "
          "compiles");
ABSL_FLAG(ByteSizeFlag, s3_part_size, ByteSizeFlag{uint64_t{16} << 20},
          "multipart upload part size in bytes (at least 5242880)");
ABSL_FLAG(ByteSizeFlag, s3_multipart_threshold,
          ByteSizeFlag{uint64_t{64} << 20},
          "NEFFs this big or bigger upload in parts, in bytes");
ABSL_FLAG(int64_t, s3_upload_concurrency, 4,
          "parts of one multipart upload sent at once, each on its own "
          "connection");
ABSL_FLAG(int64_t, s3_breaker_failures, 5,
          "consecutive S3 failures that make neffd skip S3 for a backoff");
ABSL_FLAG(DurationFlag, s3_breaker_backoff, DurationFlag{absl::Seconds(5)},
          "first time S3 is skipped after --s3_breaker_failures; doubles per "
          "failed probe");
ABSL_FLAG(DurationFlag, s3_breaker_max_backoff, DurationFlag{absl::Minutes(5)},
          "longest time S3 is skipped");

namespace neffd {
namespace {

constexpr int64_t kMaxCount = int64_t{1} << 30;

// The flags that default to an environment variable of the registry.
constexpr std::pair<const char*, const char*> kFlagVariables[] = {
    {"address", "NEFFD_ADDRESS"},
    {"admin_address", "NEFFD_ADMIN_ADDRESS"},
    {"cache_dir", "TORCH_NEURONX_NEFF_CACHE_DIR"},
    {"hlo_cache_dir", "TORCH_NEURONX_HLO_CACHE_DIR"},
    {"local_dir", "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR"},
    {"lock_timeout", "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"},
    {"v", "TORCH_NEURONX_LOG_LEVEL"},
    {"remote", "NEFFD_REMOTE"},
    {"s3_endpoint", "NEFFD_S3_ENDPOINT"},
    {"s3_region", "AWS_REGION"},
    {"remote_mode", "NEFFD_REMOTE_MODE"},
};

std::string VariableOf(absl::string_view flag) {
  for (const auto& [name, variable] : kFlagVariables) {
    if (flag == name) return variable;
  }
  return "";
}

std::string FlagOr(const absl::Flag<std::string>& flag,
                   const config::EnvSnapshot& env, absl::string_view variable) {
  const std::string value = absl::GetFlag(flag);
  return value.empty() ? env.GetString(variable) : value;
}

// The checks of values a flag's type accepts but the daemon does not.
class RangeChecks {
 public:
  void Positive(absl::string_view name, absl::Duration d) {
    if (d <= absl::ZeroDuration()) Refuse(name, d, "must be positive");
  }
  void NotNegative(absl::string_view name, absl::Duration d) {
    if (d < absl::ZeroDuration()) Refuse(name, d, "must not be negative");
  }
  void Within(absl::string_view name, int64_t value, int64_t low,
              int64_t high) {
    if (value < low || value > high) {
      errors_.push_back(absl::StrCat("--", name, ": \"", value,
                                     "\" must be between ", low, " and ",
                                     high));
    }
  }
  void Require(bool ok, absl::string_view name, absl::string_view value,
               absl::string_view why) {
    if (!ok)
      errors_.push_back(absl::StrCat("--", name, ": \"", value, "\" ", why));
  }
  std::vector<std::string> errors() && { return std::move(errors_); }

 private:
  void Refuse(absl::string_view name, absl::Duration d, absl::string_view why) {
    Require(false, name, absl::FormatDuration(d), why);
  }
  std::vector<std::string> errors_;
};

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
    const config::EnvSnapshot file =
        config::EnvSnapshot::FromMap({{"TORCH_NEURONX_LOG_LEVEL", value}});
    if (file.origin("TORCH_NEURONX_LOG_LEVEL") == config::Origin::kEnv) {
      level = static_cast<int>(file.GetInt("TORCH_NEURONX_LOG_LEVEL"));
    }
  }
  return level;
}

void AddSetting(v1::ConfigResponse* config, const absl::CommandLineFlag& flag,
                const std::string& value, const config::EnvSnapshot& env) {
  v1::ConfigValue* out = config->add_settings();
  out->set_name(std::string(flag.Name()));
  out->set_value(value);
  const std::string variable = VariableOf(flag.Name());
  if (flag.CurrentValue() != flag.DefaultValue()) {
    out->set_origin("flag");
  } else if (!variable.empty() &&
             env.origin(variable) == config::Origin::kEnv) {
    out->set_origin("env");
    out->set_note(absl::StrCat("from ", variable));
  } else {
    out->set_origin("default");
  }
}

// The S3 tier's flags (docs/REMOTE.md).
void RemoteOptionsFromFlags(const config::EnvSnapshot& env, RangeChecks& check,
                            RemoteTierOptions* remote) {
  remote->url = FlagOr(FLAGS_remote, env, "NEFFD_REMOTE");
  if (!remote->url.empty()) {
    absl::StatusOr<remote::RemoteLocation> location =
        remote::ParseRemoteUrl(remote->url);
    // ParseRemoteUrl's message names the flag and value already.
    check.Require(
        location.ok(), "remote", remote->url,
        location.ok()
            ? ""
            : absl::StripPrefix(location.status().message(),
                                absl::StrCat("--remote=", remote->url, ": ")));
  }
  remote->endpoint = FlagOr(FLAGS_s3_endpoint, env, "NEFFD_S3_ENDPOINT");
  check.Require(remote->endpoint.empty() ||
                    absl::StartsWith(remote->endpoint, "http://") ||
                    absl::StartsWith(remote->endpoint, "https://"),
                "s3_endpoint", remote->endpoint,
                "must be an http:// or https:// URL");
  remote->region = FlagOr(FLAGS_s3_region, env, "AWS_REGION");
  if (remote->region.empty())
    remote->region = env.GetString("AWS_DEFAULT_REGION");
  if (remote->region.empty()) remote->region = "us-east-1";
  check.Require(
      !remote->region.empty() &&
          remote->region.find_first_not_of(
              "abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos,
      "s3_region", remote->region, "must be a region name such as us-east-1");
  std::string mode = FlagOr(FLAGS_remote_mode, env, "NEFFD_REMOTE_MODE");
  if (mode.empty()) mode = "rw";
  check.Require(mode == "rw" || mode == "ro", "remote_mode", mode,
                "must be rw or ro");
  remote->read_only = mode == "ro";
  remote->connect_timeout = absl::GetFlag(FLAGS_s3_connect_timeout).value;
  check.Positive("s3_connect_timeout", remote->connect_timeout);
  remote->request_timeout = absl::GetFlag(FLAGS_s3_timeout).value;
  check.Positive("s3_timeout", remote->request_timeout);
  remote->lookup_timeout = absl::GetFlag(FLAGS_s3_lookup_timeout).value;
  check.Positive("s3_lookup_timeout", remote->lookup_timeout);
  remote->part_size = absl::GetFlag(FLAGS_s3_part_size).bytes;
  check.Require(remote->part_size >= remote::kMinPartSize &&
                    remote->part_size <= (uint64_t{5} << 30),
                "s3_part_size", absl::StrCat(remote->part_size),
                "must be between 5242880 (S3's minimum) and 5368709120");
  remote->multipart_threshold =
      absl::GetFlag(FLAGS_s3_multipart_threshold).bytes;
  const int64_t upload_concurrency = absl::GetFlag(FLAGS_s3_upload_concurrency);
  check.Within("s3_upload_concurrency", upload_concurrency, 1, 64);
  remote->upload_concurrency = static_cast<int>(upload_concurrency);
  const int64_t failures = absl::GetFlag(FLAGS_s3_breaker_failures);
  check.Within("s3_breaker_failures", failures, 1, kMaxCount);
  remote->breaker_failures = static_cast<int>(failures);
  remote->breaker_backoff = absl::GetFlag(FLAGS_s3_breaker_backoff).value;
  check.Positive("s3_breaker_backoff", remote->breaker_backoff);
  remote->breaker_max_backoff =
      absl::GetFlag(FLAGS_s3_breaker_max_backoff).value;
  check.Require(remote->breaker_max_backoff >= remote->breaker_backoff,
                "s3_breaker_max_backoff",
                absl::FormatDuration(remote->breaker_max_backoff),
                "must be at least --s3_breaker_backoff");
}

}  // namespace

int ReportError(int code, absl::string_view message) {
  // One line a person can act on; "<3>" makes it an error in the journal.
  std::fprintf(stderr, "%sneffd: %s\n", log::UnderJournal() ? "<3>" : "",
               std::string(message).c_str());
  return code;
}

std::string NeffdHelp() {
  return absl::StrCat(
      "usage: neffd [flags]: serve the per-host NEFF/HLO compile cache\n"
      "       neffd --version\n\n"
      "Durations are seconds (30, 0.5) or 30s, 5m, 1h, 7d; sizes are bytes or\n"
      "512MiB, 4GiB (K, M, G, T: powers of 1024).\n"
      "Flags:\n",
      config::FlagsHelp("daemon/", VariableOf),
      "\nServed only on --admin_address (neffd.proto's admin_only calls): ",
      absl::StrJoin(AdminOnlyMethods(), ", "), "\n");
}

void ParseFlagsOrExit(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "neffd [flags]: serve the per-host NEFF/HLO compile cache");
  const std::vector<std::string> args(argv, argv + argc);
  if (config::AsksForHelp(args)) {
    std::fputs(NeffdHelp().c_str(), stdout);
    std::exit(0);
  }
  if (config::AsksForVersion(args)) {
    std::puts(config::VersionLine("neffd").c_str());
    std::exit(0);
  }
  const std::vector<std::string> errors = config::CheckFlags(args);
  for (const std::string& error : errors) ReportError(kExitBadConfig, error);
  if (!errors.empty()) std::exit(kExitBadConfig);
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    std::exit(ReportError(kExitBadConfig,
                          absl::StrCat("unexpected argument '", rest[1], "'")));
  }
}

std::vector<std::string> OptionsFromFlags(const config::EnvSnapshot& env,
                                          DaemonOptions* options) {
  RangeChecks check;
  options->address = FlagOr(FLAGS_address, env, "NEFFD_ADDRESS");
  options->admin_address =
      FlagOr(FLAGS_admin_address, env, "NEFFD_ADMIN_ADDRESS");
  options->admin_group = absl::GetFlag(FLAGS_admin_group);
  options->neff_cache_dir =
      FlagOr(FLAGS_cache_dir, env, "TORCH_NEURONX_NEFF_CACHE_DIR");
  options->hlo_cache_dir =
      FlagOr(FLAGS_hlo_cache_dir, env, "TORCH_NEURONX_HLO_CACHE_DIR");
  options->local_dir =
      FlagOr(FLAGS_local_dir, env, "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR");
  options->index_dir = absl::GetFlag(FLAGS_index_dir);
  options->host_id = absl::GetFlag(FLAGS_host_id);
  options->socket_group = absl::GetFlag(FLAGS_socket_group);

  // A negative --lock_timeout means "not given", as -1 did before the flag
  // was a duration.
  const std::optional<DurationFlag> lock_timeout =
      absl::GetFlag(FLAGS_lock_timeout);
  options->lock_timeout =
      lock_timeout.has_value() && lock_timeout->value >= absl::ZeroDuration()
          ? lock_timeout->value
          : absl::Seconds(env.GetInt("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"));
  options->lease_ttl = absl::GetFlag(FLAGS_lease_ttl).value;
  check.Positive("lease_ttl", options->lease_ttl);
  options->failed_ttl = absl::GetFlag(FLAGS_failed_ttl).value;
  check.NotNegative("failed_ttl", options->failed_ttl);
  options->shutdown_grace = absl::GetFlag(FLAGS_shutdown_grace).value;
  check.NotNegative("shutdown_grace", options->shutdown_grace);
  options->poll_interval = absl::GetFlag(FLAGS_poll_interval).value;
  check.Positive("poll_interval", options->poll_interval);
  options->shared_leases = absl::GetFlag(FLAGS_shared_leases);
  options->gc_recent = absl::GetFlag(FLAGS_gc_recent_seconds).value;
  options->max_cache_size = absl::GetFlag(FLAGS_max_cache_size).bytes;
  options->gc_interval = absl::GetFlag(FLAGS_gc_interval).value;
  check.Positive("gc_interval", options->gc_interval);
  options->gc_temp_grace = absl::GetFlag(FLAGS_gc_temp_grace).value;
  check.Positive("gc_temp_grace", options->gc_temp_grace);
  options->gc_quarantine_age = absl::GetFlag(FLAGS_gc_quarantine_age).value;
  check.Positive("gc_quarantine_age", options->gc_quarantine_age);
  options->gc_quarantine_bytes = absl::GetFlag(FLAGS_gc_quarantine_bytes).bytes;
  options->gc_trash_age = absl::GetFlag(FLAGS_gc_trash_age).value;
  check.Positive("gc_trash_age", options->gc_trash_age);
  options->gc_trash_bytes = absl::GetFlag(FLAGS_gc_trash_bytes).bytes;
  options->access_journal_grain =
      absl::GetFlag(FLAGS_access_journal_grain).value;
  check.Positive("access_journal_grain", options->access_journal_grain);
  options->access_journal_spacing =
      absl::GetFlag(FLAGS_access_journal_spacing).value;
  check.Positive("access_journal_spacing", options->access_journal_spacing);

  options->max_entry_bytes = absl::GetFlag(FLAGS_max_entry_bytes).bytes;
  options->max_inline_bytes = absl::GetFlag(FLAGS_max_inline_bytes).bytes;
  options->staging_quota_per_uid =
      absl::GetFlag(FLAGS_staging_quota_per_uid).bytes;
  check.Require(options->max_inline_bytes <= uint64_t{kMaxCount},
                "max_inline_bytes", absl::StrCat(options->max_inline_bytes),
                absl::StrCat("must be at most ", kMaxCount));
  const int64_t leases = absl::GetFlag(FLAGS_max_leases_per_pid);
  check.Within("max_leases_per_pid", leases, 0, kMaxCount);
  options->max_leases_per_pid = static_cast<int>(leases);
  const int64_t waiters = absl::GetFlag(FLAGS_max_lock_waiters);
  check.Within("max_lock_waiters", waiters, 0, kMaxCount);
  options->max_lock_waiters = static_cast<int>(waiters);
  // gRPC needs one thread polling for calls while another serves one.
  const int64_t threads = absl::GetFlag(FLAGS_max_rpc_threads);
  check.Within("max_rpc_threads", threads, 2, int64_t{1} << 20);
  options->max_rpc_threads = static_cast<int>(threads);

  options->tls.cert = absl::GetFlag(FLAGS_tls_cert);
  options->tls.key = absl::GetFlag(FLAGS_tls_key);
  options->tls.client_ca = absl::GetFlag(FLAGS_tls_client_ca);
  options->local_tier = absl::GetFlag(FLAGS_local_tier);
  options->local_tier_bytes = absl::GetFlag(FLAGS_local_tier_bytes).bytes;
  options->metrics_textfile = absl::GetFlag(FLAGS_metrics_textfile);
  check.Require(
      options->metrics_textfile.empty() || options->metrics_textfile[0] == '/',
      "metrics_textfile", options->metrics_textfile,
      "must be an absolute path");
  options->metrics_interval = absl::GetFlag(FLAGS_metrics_interval).value;
  check.Positive("metrics_interval", options->metrics_interval);
  RemoteOptionsFromFlags(env, check, &options->remote);
  return std::move(check).errors();
}

int Verbosity(const config::EnvSnapshot& env, bool reread_env_file) {
  if (const std::optional<LogLevelFlag> v = absl::GetFlag(FLAGS_v)) {
    return v->level;
  }
  if (reread_env_file) {
    const int from_file = LogLevelFromEnvFile(absl::GetFlag(FLAGS_env_file));
    if (from_file >= 0) return from_file;
  }
  return static_cast<int>(env.GetInt("TORCH_NEURONX_LOG_LEVEL"));
}

v1::ConfigResponse DescribeConfig(const DaemonOptions& o,
                                  const config::EnvSnapshot& env,
                                  int verbosity) {
  // What the daemon derived from a flag and the environment, where that is
  // not the flag's parsed value; every other flag is reported as parsed, so
  // a new ABSL_FLAG above shows up in GetConfig (and --help) by itself.
  const std::map<std::string, std::string> derived = {
      {"address", o.address},
      {"admin_address", o.admin_address},
      {"cache_dir", o.neff_cache_dir},
      {"hlo_cache_dir", o.hlo_cache_dir},
      {"local_dir", o.local_dir},
      {"index_dir", o.index_dir.empty() ? o.local_dir + "/index" : o.index_dir},
      {"lock_timeout", absl::FormatDuration(o.lock_timeout)},
      {"host_id", o.host_id.empty() ? "(hostname)" : o.host_id},
      {"remote", o.remote.url},
      {"s3_endpoint", o.remote.endpoint},
      {"s3_region", o.remote.region},
      {"remote_mode", o.remote.read_only ? "ro" : "rw"},
      {"v", absl::StrCat(verbosity)},
  };
  v1::ConfigResponse config;
  for (const absl::CommandLineFlag* flag : config::FlagsUnder("daemon/")) {
    const auto it = derived.find(std::string(flag->Name()));
    AddSetting(&config, *flag,
               it != derived.end() ? it->second : flag->CurrentValue(), env);
  }
  for (const config::VarSpec& spec : config::Variables()) {
    if ((spec.readers & config::kDaemon) == 0) continue;
    v1::ConfigValue* v = config.add_variables();
    v->set_name(spec.name);
    v->set_value(env.FormatValue(spec.name));
    v->set_origin(std::string(config::OriginName(env.origin(spec.name))));
    v->set_note(env.note(spec.name));
  }
  for (const std::string& w : env.warnings()) config.add_warnings(w);
  return config;
}

}  // namespace neffd
