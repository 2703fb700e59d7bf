// daemon/flags.h
//
// neffd's command line. Every flag defaults to its environment variable (read
// through the config registry, config/env.h), then to the spec's default, so
// `neffd` with no flags serves the same directories that torch-neuronx ranks
// on this host use. Durations take bare seconds or absl's forms, sizes and
// counts are integers, the log level is a number or a name
// (config/flags.h).
//
//   - ParseFlagsOrExit() handles --help (prints NeffdHelp(), exits 0) and
//     refuses bad flags with one line each naming the flag (exit 2) before
//     absl parses them.
//   - OptionsFromFlags() turns the parsed flags and the environment into
//     DaemonOptions; a value its type accepts but the daemon does not (a
//     zero lease TTL, a relative metrics path) is one error naming the flag.
//   - DescribeConfig() is what GetConfig reports: every flag --help lists
//     (each ABSL_FLAG in daemon/, by the registry) with where its value
//     came from (flag, env, default) and the variables the daemon reads.
//
// Not thread-safe: call from main before any thread starts, except
// Verbosity(), which may be called at any time.
#ifndef NEFFD_DAEMON_FLAGS_H_
#define NEFFD_DAEMON_FLAGS_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "config/env.h"
#include "daemon/runtime/daemon.h"
#include "proto/neffd/v1/neffd.pb.h"

namespace neffd {

// The exit code of a bad flag, argument or configuration.
inline constexpr int kExitBadConfig = 2;

// Prints `neffd: MESSAGE` as one line on stderr (an error in the journal
// when under systemd) and returns `code`.
int ReportError(int code, absl::string_view message);

// Parses argv into the flags, or exits (0 after help, 2 with one line per
// bad flag or a stray argument).
void ParseFlagsOrExit(int argc, char** argv);

// Every flag, its default and its environment variable.
std::string NeffdHelp();

// The options the flags and `env` ask for; on error, one message per flag
// whose value is out of range (`--lease_ttl: "0s" must be positive`).
std::vector<std::string> OptionsFromFlags(const config::EnvSnapshot& env,
                                          DaemonOptions* options);

// The log verbosity: --v, else (with `reread_env_file`, on SIGHUP) the
// --env_file, else the environment.
int Verbosity(const config::EnvSnapshot& env, bool reread_env_file);

// GetConfig's answer: the daemon's settings and the variables it reads.
v1::ConfigResponse DescribeConfig(const DaemonOptions& options,
                                  const config::EnvSnapshot& env,
                                  int verbosity);

}  // namespace neffd

#endif  // NEFFD_DAEMON_FLAGS_H_
