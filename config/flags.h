// config/flags.h
//
// The command-line side of configuration, shared by neffd and neffctl: flag
// types that accept what operators already type, checking argv against
// absl's flag registry with one line per bad flag, and help text built from
// the registry.
//
//   - DurationFlag takes bare seconds ("30", "0.2"), as scripts, unit files
//     and docs pass them, and absl's duration forms ("30s", "1m30s",
//     "250ms", and days, "7d"); it is shown as absl formats durations
//     ("30s", "168h").
//   - ByteSizeFlag takes bytes ("1048576") or a number with a unit, K, M, G,
//     T or P, each a power of 1024, with or without "iB"/"B" ("512MiB",
//     "4G", "1.5GiB"); it is shown in the largest unit that divides it
//     exactly ("4GiB", "1000").
//   - LogLevelFlag takes 0-3 or error, warning, info, debug (the levels of
//     TORCH_NEURONX_LOG_LEVEL) and is shown as the number.
//   - CheckFlags() finds what absl would reject (an unknown flag, a value its
//     type does not parse, a missing value) before absl parses, so a caller
//     can report it as "--lease_ttl: "abc" is not a duration" and exit 2
//     instead of absl's exit 1 with its own text. Flags may be given as
//     --name=value, --name value, -name, and bool flags as --name or
//     --noname; "--" ends the flags.
//   - FlagsHelp() lists the flags defined in the files under one directory,
//     each with its type's placeholder, its help, its default and the
//     environment variable it defaults to, if any.
//
// Thread-safety: the flag types are values; CheckFlags and FlagsHelp read
// the registry and may run concurrently with each other but not with flag
// parsing or SetFlag.
#ifndef NEFFD_CONFIG_FLAGS_H_
#define NEFFD_CONFIG_FLAGS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace neffd::config {

struct DurationFlag {
  absl::Duration value;
};
bool AbslParseFlag(absl::string_view text, DurationFlag* flag,
                   std::string* error);
std::string AbslUnparseFlag(const DurationFlag& flag);

struct ByteSizeFlag {
  uint64_t bytes = 0;
};
bool AbslParseFlag(absl::string_view text, ByteSizeFlag* flag,
                   std::string* error);
std::string AbslUnparseFlag(const ByteSizeFlag& flag);

struct LogLevelFlag {
  int level = 1;  // 0 error, 1 warning, 2 info, 3 debug
};
bool AbslParseFlag(absl::string_view text, LogLevelFlag* flag,
                   std::string* error);
std::string AbslUnparseFlag(const LogLevelFlag& flag);

// True if `args` (argv, program name first) ask for help: --help, -help,
// -h or --helpfull before any "--".
bool AsksForHelp(absl::Span<const std::string> args);

// One message per flag in `args` (argv, program name first) that absl
// would refuse, each naming the flag: `--NAME: "VALUE" is not a duration`,
// `--NAME: no such flag`, `--NAME: needs a value`. Empty if all parse.
std::vector<std::string> CheckFlags(absl::Span<const std::string> args);

// What "--name=" is followed by in help: DURATION, SIZE, N, LEVEL, VALUE;
// empty for a bool flag.
std::string Placeholder(const absl::CommandLineFlag& flag);

// Every flag defined in a file under `directory` (e.g. "daemon/"), sorted
// by name: what --help lists and what GetConfig reports.
std::vector<const absl::CommandLineFlag*> FlagsUnder(
    absl::string_view directory);

// The help of every flag defined in a file under `directory` (e.g.
// "daemon/"), sorted by name:
//   --lease_ttl=DURATION
//       how long a lease lives without a KeepAlive (default: 30s)
// `environment(name)` names the registry variable (config/env.h) a flag
// defaults to, or returns ""; such a flag's default reads
// "$VARIABLE, else VARIABLE'S DEFAULT".
std::string FlagsHelp(
    absl::string_view directory,
    const std::function<std::string(absl::string_view flag)>& environment);

}  // namespace neffd::config

#endif  // NEFFD_CONFIG_FLAGS_H_
