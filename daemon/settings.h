// daemon/settings.h
//
// neffd's settings table (ccache's config table is the model): one row per
// setting that is a flag read into one DaemonOptions field. A row yields
//   - the flag (ABSL_FLAG, in daemon/flags.cc), whose default is the
//     field's default in DaemonOptions (or RemoteTierOptions): a default is
//     declared once, where the options struct declares its field;
//   - the field's value in OptionsFromFlags, after the row's range check;
//   - its environment variable, if any: a string flag left empty takes the
//     variable's value through the config registry (config/env.h), and
//     --help and GetConfig name it;
//   - its line in --help and in GetConfig (`neffctl config`), which walk
//     absl's flag registry.
// Adding such a setting is one row. Settings the daemon derives from more
// than one source (--lock_timeout and --v fall back to a typed variable,
// --s3_region to two, --remote_mode is a word for a bool, --env_file is not
// an option) are written out in daemon/flags.cc.
//
// A row: NEFFD_SETTING(FlagType, flag_name, field, check, "VARIABLE", help)
//   FlagType  std::string, bool, int64_t (for an int field), DurationFlag
//             (absl::Duration), ByteSizeFlag (uint64_t bytes)
//   field     the DaemonOptions member it sets (`remote.part_size`)
//   check     Any{}, Positive{}, NotNegative{}, AbsolutePath{},
//             (Within<LOW, HIGH>{}), (AtMost<HIGH>{}): a value the type
//             accepts but the daemon does not is one error naming the flag
//   VARIABLE  "" or the registry variable an empty string flag defaults to
#ifndef NEFFD_DAEMON_SETTINGS_H_
#define NEFFD_DAEMON_SETTINGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "config/env.h"
#include "config/flags.h"

// clang-format off
#define NEFFD_DAEMON_SETTINGS(NEFFD_SETTING)                                  \
  NEFFD_SETTING(std::string, address, address, Any{}, "NEFFD_ADDRESS",        \
      "the ranks' socket (CompileCache, read-only operator calls): "          \
      "unix:/path or loopback HOST:PORT (any HOST:PORT with mutual TLS)")     \
  NEFFD_SETTING(std::string, admin_address, admin_address, Any{},             \
      "NEFFD_ADMIN_ADDRESS",                                                  \
      "the operators' socket, the only one serving the calls that change "    \
      "the cache (listed below)")                                             \
  NEFFD_SETTING(std::string, admin_group, admin_group, Any{}, "",             \
      "group that may use the admin socket (mode 0660; must exist); "         \
      "empty: mode 0600, the service user only")                              \
  NEFFD_SETTING(std::string, cache_dir, neff_cache_dir, Any{},                \
      "TORCH_NEURONX_NEFF_CACHE_DIR", "NEFF cache root")                      \
  NEFFD_SETTING(std::string, hlo_cache_dir, hlo_cache_dir, Any{},             \
      "TORCH_NEURONX_HLO_CACHE_DIR", "HLO cache root")                        \
  NEFFD_SETTING(std::string, local_dir, local_dir, Any{},                     \
      "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR",                                   \
      "local lock and scratch dir; must be a local filesystem")               \
  NEFFD_SETTING(std::string, index_dir, index_dir, Any{}, "",                 \
      "RocksDB index (empty: {local_dir}/index)")                             \
  NEFFD_SETTING(DurationFlag, lease_ttl, lease_ttl, Positive{}, "",           \
      "how long a lease lives without a KeepAlive")                           \
  NEFFD_SETTING(DurationFlag, failed_ttl, failed_ttl, NotNegative{}, "",      \
      "how long a recorded compile failure is served before a retry")         \
  NEFFD_SETTING(DurationFlag, shutdown_grace, shutdown_grace, NotNegative{},  \
      "", "how long in-flight calls get to finish on SIGTERM")                \
  NEFFD_SETTING(DurationFlag, poll_interval, poll_interval, Positive{}, "",   \
      "time between checks of a key another host is compiling")               \
  NEFFD_SETTING(bool, shared_leases, shared_leases, Any{}, "",                \
      "take cross-host lease files on the shared store")                      \
  NEFFD_SETTING(std::string, coordinator, coordinator, Any{},                 \
      "NEFFD_COORDINATOR",                                                    \
      "cross-host leases and watches on etcd, etcd://HOST:PORT[,HOST:PORT]; " \
      "falls back to the filesystem protocol while etcd does not answer "     \
      "(empty: that protocol only)")                                          \
  NEFFD_SETTING(DurationFlag, etcd_lease_ttl, etcd.lease_ttl, Positive{}, "", \
      "with --coordinator: how long after this daemon dies its keys are "     \
      "handed on (etcd grants at least its minimum: 2s at its default "       \
      "timing, 1s with --election-timeout=500)")                              \
  NEFFD_SETTING(DurationFlag, etcd_timeout, etcd.call_timeout, Positive{},    \
      "", "with --coordinator: deadline for one etcd call; a call that "      \
      "fails or takes longer switches new keys to the filesystem protocol")   \
  NEFFD_SETTING(std::string, etcd_ca, etcd.ca, Any{}, "",                     \
      "with --coordinator: PEM CA for etcd's TLS (empty: plaintext)")         \
  NEFFD_SETTING(std::string, etcd_cert, etcd.cert, Any{}, "",                 \
      "with --coordinator: PEM client certificate for etcd's mutual TLS")     \
  NEFFD_SETTING(std::string, etcd_key, etcd.key, Any{}, "",                   \
      "with --coordinator: PEM key of --etcd_cert")                           \
  NEFFD_SETTING(DurationFlag, gc_recent_seconds, gc_recent, Any{}, "",        \
      "gc never removes an entry served on this host this recently")          \
  NEFFD_SETTING(ByteSizeFlag, max_cache_size, max_cache_size, Any{}, "",      \
      "run gc every --gc_interval to keep the neff store under this many "    \
      "bytes (0: no size goal; gc still sweeps leftovers)")                   \
  NEFFD_SETTING(DurationFlag, gc_interval, gc_interval, Positive{}, "",       \
      "time between periodic gc runs (each sweeps both stores' leftovers)")   \
  NEFFD_SETTING(DurationFlag, gc_temp_grace, gc_temp_grace, Positive{}, "",   \
      "gc removes temp files of crashed publishes (.{key}.neff.tmp.*) "       \
      "older than this")                                                      \
  NEFFD_SETTING(DurationFlag, gc_quarantine_age, gc_quarantine_age,           \
      Positive{}, "", "gc removes quarantined entries older than this")       \
  NEFFD_SETTING(ByteSizeFlag, gc_quarantine_bytes, gc_quarantine_bytes,       \
      Any{}, "",                                                              \
      "gc keeps {cache_dir}/quarantine within this many bytes, oldest "       \
      "removed first (0: no size bound)")                                     \
  NEFFD_SETTING(DurationFlag, gc_trash_age, gc_trash_age, Positive{}, "",     \
      "gc removes what removed entries left in {cache_dir}/.trash after "     \
      "this long")                                                            \
  NEFFD_SETTING(ByteSizeFlag, gc_trash_bytes, gc_trash_bytes, Any{}, "",      \
      "gc keeps {cache_dir}/.trash within this many bytes, oldest removed "   \
      "first (0: no size bound)")                                             \
  NEFFD_SETTING(DurationFlag, access_journal_grain, access_journal_grain,     \
      Positive{}, "",                                                         \
      "cluster gc: how far this host's record of serving an entry "           \
      "({cache_dir}/.access/{host_id}) may lag")                              \
  NEFFD_SETTING(DurationFlag, access_journal_spacing, access_journal_spacing, \
      Positive{}, "",                                                         \
      "cluster gc: least time between rewrites of this host's access "        \
      "journal")                                                              \
  NEFFD_SETTING(bool, local_tier, local_tier, Any{}, "",                      \
      "serve neff entries from a verified copy in {local_dir}/tier")          \
  NEFFD_SETTING(ByteSizeFlag, local_tier_bytes, local_tier_bytes, Any{}, "",  \
      "local tier capacity in bytes (0: 20% of the local filesystem)")        \
  NEFFD_SETTING(std::string, host_id, host_id, Any{}, "",                     \
      "this host's name (empty: hostname)")                                   \
  NEFFD_SETTING(std::string, socket_group, socket_group, Any{}, "",           \
      "group that owns the unix socket (mode 0660) when it exists")           \
  NEFFD_SETTING(std::string, metrics_textfile, metrics_textfile,              \
      AbsolutePath{}, "",                                                     \
      "write Prometheus metrics here atomically (node_exporter textfile "     \
      "collector), e.g. /var/lib/node_exporter/textfile/neffd.prom")          \
  NEFFD_SETTING(DurationFlag, metrics_interval, metrics_interval, Positive{}, \
      "", "time between metrics textfile writes")                             \
  NEFFD_SETTING(ByteSizeFlag, max_entry_bytes, max_entry_bytes, Any{}, "",    \
      "largest entry a client may publish, in bytes")                         \
  NEFFD_SETTING(ByteSizeFlag, max_inline_bytes, max_inline_bytes,             \
      (AtMost<neffd::settings::kMaxCount>{}), "",                             \
      "largest entry a client may publish inline (hlo), in bytes; at most "   \
      "1073741824")                                                           \
  NEFFD_SETTING(ByteSizeFlag, staging_quota_per_uid, staging_quota_per_uid,   \
      Any{}, "",                                                              \
      "bytes one user's ranks may have staged in {local_dir}/staging at "     \
      "once; a publish over it is refused, and the oldest files over it are " \
      "removed every minute (0: no limit)")                                   \
  NEFFD_SETTING(int64_t, max_leases_per_pid, max_leases_per_pid,              \
      (Within<0, neffd::settings::kMaxCount>{}), "",                          \
      "leases one client process may hold at once (0: no limit)")             \
  NEFFD_SETTING(int64_t, max_lock_waiters, max_lock_waiters,                  \
      (Within<0, neffd::settings::kMaxCount>{}), "",                          \
      "Lock calls that may wait at once across all clients; more get "        \
      "RESOURCE_EXHAUSTED at once (0: no limit)")                             \
  /* gRPC needs one thread polling for calls while another serves one. */    \
  NEFFD_SETTING(int64_t, max_rpc_threads, max_rpc_threads,                    \
      (Within<2, (int64_t{1} << 20)>{}), "",                                  \
      "threads serving the synchronous calls (Publish, KeepAlive, Unlock, "   \
      "GetStats, admin, health); a call finding all busy gets "               \
      "RESOURCE_EXHAUSTED (at least 2)")                                      \
  NEFFD_SETTING(std::string, tls_cert, tls.cert, Any{}, "",                   \
      "PEM certificate chain; with --tls_key and --tls_client_ca, serve TCP " \
      "over mutual TLS (needed for a non-loopback address)")                  \
  NEFFD_SETTING(std::string, tls_key, tls.key, Any{}, "",                     \
      "PEM private key for --tls_cert")                                       \
  NEFFD_SETTING(std::string, tls_client_ca, tls.client_ca, Any{}, "",         \
      "PEM CA certificate(s); TCP clients must present a certificate signed " \
      "by one of them")                                                       \
  NEFFD_SETTING(std::string, remote, remote.url, Any{}, "NEFFD_REMOTE",       \
      "S3 tier behind the shared store, s3://BUCKET/PREFIX (empty: off)")     \
  NEFFD_SETTING(std::string, s3_endpoint, remote.endpoint, Any{},             \
      "NEFFD_S3_ENDPOINT",                                                    \
      "S3 endpoint URL for S3-compatible stores (empty: AWS's regional "      \
      "endpoint)")                                                            \
  NEFFD_SETTING(DurationFlag, s3_connect_timeout, remote.connect_timeout,     \
      Positive{}, "", "deadline for connecting to S3")                        \
  NEFFD_SETTING(DurationFlag, s3_timeout, remote.request_timeout, Positive{}, \
      "", "deadline for one S3 request (a whole GET, one upload part)")       \
  NEFFD_SETTING(DurationFlag, s3_lookup_timeout, remote.lookup_timeout,       \
      Positive{}, "",                                                         \
      "deadline for the model.done GET a miss makes before anyone compiles")  \
  NEFFD_SETTING(ByteSizeFlag, s3_part_size, remote.part_size,                 \
      (Within<(int64_t{5} << 20), (int64_t{5} << 30)>{}), "",                 \
      "multipart upload part size in bytes (at least 5242880, S3's "          \
      "minimum)")                                                             \
  NEFFD_SETTING(ByteSizeFlag, s3_multipart_threshold,                         \
      remote.multipart_threshold, Any{}, "",                                  \
      "NEFFs this big or bigger upload in parts, in bytes")                   \
  NEFFD_SETTING(int64_t, s3_upload_concurrency, remote.upload_concurrency,    \
      (Within<1, 64>{}), "",                                                  \
      "parts of one multipart upload sent at once, each on its own "          \
      "connection")                                                           \
  NEFFD_SETTING(int64_t, s3_breaker_failures, remote.breaker_failures,        \
      (Within<1, neffd::settings::kMaxCount>{}), "",                          \
      "consecutive S3 failures that make neffd skip S3 for a backoff")        \
  NEFFD_SETTING(DurationFlag, s3_breaker_backoff, remote.breaker_backoff,     \
      Positive{}, "",                                                         \
      "first time S3 is skipped after --s3_breaker_failures; doubles per "    \
      "failed probe")                                                         \
  NEFFD_SETTING(DurationFlag, s3_breaker_max_backoff,                         \
      remote.breaker_max_backoff, Positive{}, "",                             \
      "longest time S3 is skipped")
// clang-format on

namespace neffd::settings {

using config::ByteSizeFlag;
using config::DurationFlag;

inline constexpr int64_t kMaxCount = int64_t{1} << 30;

// The errors of values a flag's type accepts but the daemon does not, one
// per flag: `--lease_ttl: "0" must be positive`.
class RangeChecks {
 public:
  void Require(bool ok, absl::string_view name, absl::string_view value,
               absl::string_view why) {
    if (!ok) {
      errors_.push_back(absl::StrCat("--", name, ": \"", value, "\" ", why));
    }
  }
  std::vector<std::string> errors() && { return std::move(errors_); }

 private:
  std::vector<std::string> errors_;
};

struct Any {
  template <typename V>
  void operator()(RangeChecks&, absl::string_view, const V&) const {}
};
struct Positive {
  void operator()(RangeChecks& c, absl::string_view name,
                  absl::Duration d) const {
    c.Require(d > absl::ZeroDuration(), name, absl::FormatDuration(d),
              "must be positive");
  }
};
struct NotNegative {
  void operator()(RangeChecks& c, absl::string_view name,
                  absl::Duration d) const {
    c.Require(d >= absl::ZeroDuration(), name, absl::FormatDuration(d),
              "must not be negative");
  }
};
struct AbsolutePath {
  void operator()(RangeChecks& c, absl::string_view name,
                  const std::string& path) const {
    c.Require(path.empty() || path[0] == '/', name, path,
              "must be an absolute path");
  }
};
template <int64_t kLow, int64_t kHigh>
struct Within {
  template <typename V>
  void operator()(RangeChecks& c, absl::string_view name, V value) const {
    const bool ok = static_cast<uint64_t>(value) <= uint64_t{kHigh} &&
                    static_cast<int64_t>(value) >= kLow;
    c.Require(ok, name, absl::StrCat(value),
              absl::StrCat("must be between ", kLow, " and ", kHigh));
  }
};
template <int64_t kHigh>
struct AtMost {
  void operator()(RangeChecks& c, absl::string_view name,
                  uint64_t value) const {
    c.Require(value <= uint64_t{kHigh}, name, absl::StrCat(value),
              absl::StrCat("must be at most ", kHigh));
  }
};

// A row's flag default: its field's default, or empty for a string flag
// that defaults to a variable.
template <typename FlagType, typename Field>
FlagType Default(const Field& field, absl::string_view variable) {
  if constexpr (std::is_same_v<FlagType, DurationFlag>) {
    return DurationFlag{field};
  } else if constexpr (std::is_same_v<FlagType, ByteSizeFlag>) {
    return ByteSizeFlag{field};
  } else if constexpr (std::is_same_v<FlagType, std::string>) {
    return variable.empty() ? field : std::string();
  } else {
    return static_cast<FlagType>(field);
  }
}

// Sets `*field` from a row's parsed flag (or its variable), after `check`.
template <typename FlagType, typename Field, typename Check>
void Read(const FlagType& flag, absl::string_view name,
          absl::string_view variable, const config::EnvSnapshot& env,
          const Check& check, RangeChecks& checks, Field* field) {
  if constexpr (std::is_same_v<FlagType, DurationFlag>) {
    check(checks, name, flag.value);
    *field = flag.value;
  } else if constexpr (std::is_same_v<FlagType, ByteSizeFlag>) {
    check(checks, name, flag.bytes);
    *field = flag.bytes;
  } else if constexpr (std::is_same_v<FlagType, std::string>) {
    *field = flag.empty() && !variable.empty() ? env.GetString(variable) : flag;
    check(checks, name, *field);
  } else {
    check(checks, name, flag);
    *field = static_cast<Field>(flag);
  }
}

// A string field's value if its row has a variable (GetConfig shows what
// the variable gave), else nullopt.
template <typename Field>
std::optional<std::string> FromVariable(const Field& field,
                                        absl::string_view variable) {
  if constexpr (std::is_same_v<Field, std::string>) {
    if (!variable.empty()) return field;
  }
  return std::nullopt;
}

}  // namespace neffd::settings

#endif  // NEFFD_DAEMON_SETTINGS_H_
