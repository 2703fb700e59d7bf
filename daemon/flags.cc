#include "daemon/flags.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "config/defaults.h"
#include "config/flags.h"
#include "config/version.h"
#include "daemon/log/log.h"
#include "daemon/s3/remote_layout.h"
#include "daemon/s3/s3_client.h"
#include "daemon/settings.h"
#include "proto/admin_only.h"

using neffd::config::ByteSizeFlag;
using neffd::config::DurationFlag;
using neffd::config::LogLevelFlag;
using neffd::settings::AbsolutePath;
using neffd::settings::Any;
using neffd::settings::AtMost;
using neffd::settings::NotNegative;
using neffd::settings::Positive;
using neffd::settings::Within;

// The settings table's flags (daemon/settings.h), each defaulting to its
// field's default in DaemonOptions.
#define NEFFD_DEFINE_FLAG(FlagType, name, field, check, variable, help)      \
  ABSL_FLAG(FlagType, name,                                                  \
            neffd::settings::Default<FlagType>(neffd::DaemonOptions{}.field, \
                                               variable),                    \
            help);
NEFFD_DAEMON_SETTINGS(NEFFD_DEFINE_FLAG)
#undef NEFFD_DEFINE_FLAG

// The settings the daemon derives from more than one source.
ABSL_FLAG(std::optional<DurationFlag>, lock_timeout, std::nullopt,
          "how long a Lock waits when the request gives no wait");
ABSL_FLAG(std::optional<LogLevelFlag>, v, std::nullopt,
          "log verbosity: 0 error, 1 warning, 2 info, 3 debug (or the name)");
ABSL_FLAG(std::string, env_file, "/etc/neffd/neffd.env",
          "re-read on SIGHUP for TORCH_NEURONX_LOG_LEVEL (systemd's "
          "EnvironmentFile)");
ABSL_FLAG(std::string, s3_region, "",
          "S3 signing region (empty: AWS_REGION, AWS_DEFAULT_REGION, else "
          "us-east-1)");
ABSL_FLAG(std::string, remote_mode, "",
          "rw: read through and upload; ro: read through only (empty: rw)");

namespace neffd {
namespace {

using settings::RangeChecks;

// The flags that default to an environment variable of the registry: the
// table's, and the derived ones'.
// clang-format off
#define NEFFD_FLAG_VARIABLE(FlagType, name, field, check, variable, help) \
  {#name, variable},
constexpr std::pair<const char*, const char*> kFlagVariables[] = {
    NEFFD_DAEMON_SETTINGS(NEFFD_FLAG_VARIABLE)
    {"lock_timeout", "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"},
    {"v", "TORCH_NEURONX_LOG_LEVEL"},
    {"s3_region", "AWS_REGION"},
    {"remote_mode", "NEFFD_REMOTE_MODE"},
};
#undef NEFFD_FLAG_VARIABLE
// clang-format on

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

// The S3 tier's derived settings and the checks across its flags
// (docs/REMOTE.md); the table has set the rest of `remote`.
void CheckRemoteOptions(const config::EnvSnapshot& env, RangeChecks& check,
                        RemoteTierOptions* remote) {
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
  check.Require(remote->endpoint.empty() ||
                    absl::StartsWith(remote->endpoint, "http://") ||
                    absl::StartsWith(remote->endpoint, "https://"),
                "s3_endpoint", remote->endpoint,
                "must be an http:// or https:// URL");
  remote->region = FlagOr(FLAGS_s3_region, env, "AWS_REGION");
  if (remote->region.empty())
    remote->region = env.GetString("AWS_DEFAULT_REGION");
  if (remote->region.empty()) remote->region = RemoteTierOptions().region;
  check.Require(
      remote->region.find_first_not_of(
          "abcdefghijklmnopqrstuvwxyz0123456789-") == std::string::npos,
      "s3_region", remote->region, "must be a region name such as us-east-1");
  std::string mode = FlagOr(FLAGS_remote_mode, env, "NEFFD_REMOTE_MODE");
  if (mode.empty()) mode = "rw";
  check.Require(mode == "rw" || mode == "ro", "remote_mode", mode,
                "must be rw or ro");
  remote->read_only = mode == "ro";
  check.Require(remote->breaker_max_backoff >= remote->breaker_backoff,
                "s3_breaker_max_backoff",
                absl::FormatDuration(remote->breaker_max_backoff),
                "must be at least --s3_breaker_backoff");
}

// --coordinator is empty or etcd://HOST:PORT[,HOST:PORT...].
void CheckCoordinator(const std::string& coordinator, RangeChecks& check) {
  if (coordinator.empty()) return;
  absl::string_view endpoints = coordinator;
  bool ok = absl::ConsumePrefix(&endpoints, "etcd://") && !endpoints.empty();
  for (absl::string_view endpoint : absl::StrSplit(endpoints, ',')) {
    const size_t colon = endpoint.rfind(':');
    int port = 0;
    ok = ok && colon != absl::string_view::npos && colon > 0 &&
         absl::SimpleAtoi(endpoint.substr(colon + 1), &port) && port > 0 &&
         port < 65536;
  }
  check.Require(ok, "coordinator", coordinator,
                "must be etcd://HOST:PORT[,HOST:PORT...]");
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
  RangeChecks checks;
#define NEFFD_READ_FLAG(FlagType, name, field, check, variable, help)      \
  settings::Read(absl::GetFlag(FLAGS_##name), #name, variable, env, check, \
                 checks, &options->field);
  NEFFD_DAEMON_SETTINGS(NEFFD_READ_FLAG)
#undef NEFFD_READ_FLAG
  // A negative --lock_timeout means "not given", as -1 did before the flag
  // was a duration.
  const std::optional<DurationFlag> lock_timeout =
      absl::GetFlag(FLAGS_lock_timeout);
  options->lock_timeout =
      lock_timeout.has_value() && lock_timeout->value >= absl::ZeroDuration()
          ? lock_timeout->value
          : absl::Seconds(env.GetInt("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"));
  CheckRemoteOptions(env, checks, &options->remote);
  CheckCoordinator(options->coordinator, checks);
  return std::move(checks).errors();
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
  std::map<std::string, std::string> derived = {
      {"index_dir", o.index_dir.empty() ? o.local_dir + "/index" : o.index_dir},
      {"lock_timeout", absl::FormatDuration(o.lock_timeout)},
      {"host_id", o.host_id.empty() ? "(hostname)" : o.host_id},
      {"s3_region", o.remote.region},
      {"remote_mode", o.remote.read_only ? "ro" : "rw"},
      {"v", absl::StrCat(verbosity)},
  };
  // A string flag left empty took its variable's value.
#define NEFFD_FROM_VARIABLE(FlagType, name, field, check, variable, help) \
  if (std::optional<std::string> value =                                  \
          settings::FromVariable(o.field, variable)) {                    \
    derived[#name] = *value;                                              \
  }
  NEFFD_DAEMON_SETTINGS(NEFFD_FROM_VARIABLE)
#undef NEFFD_FROM_VARIABLE
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
