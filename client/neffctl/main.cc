// neffctl: the operator and scripting CLI for neffd.
//
//   neffctl [--address A] [--json] lookup NS KEY [--compiler_version V]
//   neffctl [--address A] [--json] put NS KEY FILE [--compiler_version V]
//   neffctl [--address A] [--json] get NS KEY OUT [--compiler_version V]
//   neffctl [--address A] [--json] stats [-z]
//   neffctl [--address A] [--json] ls [--namespace NS] [--compiler_version V]
//                                     [--failed] [--locked]
//                                     [--sort key|size|last_access] [--limit N]
//   neffctl [--address A] [--json] show NS KEY [--compiler_version V]
//   neffctl [--address A] [--json] locks
//   neffctl [--address A] [--json] drain | undrain
//   neffctl [--address A] [--json] health [--service NAME]
//   neffctl [--address A] [--json] config
//   neffctl [--address A] [--json] evict NS KEY [--compiler_version V]
//   neffctl [--address A] [--json] forget NS KEY [--compiler_version V]
//   neffctl [--address A] [--json] verify [--all] [--namespace NS]
//   neffctl [--address A] [--json] gc [--max-size SIZE] [--older-than AGE]
//                                     [--dry-run] [--namespace NS]
//   neffctl [--address A] [--json] import DIR [--clear-stale-locks]
//   neffctl [--address A] [--json] warm --manifest FILE
//   neffctl [--address A] [--json] manifest [--since AGE] > FILE
//   neffctl [--address A] [--json] why NS KEY [--compiler_version V]
//   neffctl [--address A] [--json] drift [--compiler_version V]
//                                        [--namespace NS]
//   neffctl [--address A] [--json] doctor
//
//   neffctl --help | help [COMMAND]
//   neffctl --version
//
// Flags may be spelled with '-' or '_'. Exit codes: 0 success or hit, 1 miss
// (or a recorded failure / lock timeout / nothing to evict / no such entry /
// health NOT_SERVING / no record of a key's inputs), 2 bad input or usage (one
// line on stderr), 3 daemon unreachable, 4 the daemon failed or refused the
// operation (PERMISSION_DENIED: a mutating command sent to the ranks'
// socket; it goes to --admin_address).
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/daemon_channel.h"
#include "client/neffctl/ctl.h"
#include "config/flags.h"
#include "config/version.h"
#include "proto/admin_only.h"

ABSL_FLAG(std::string, address, "",
          "daemon address (default $NEFFD_ADDRESS, else "
          "unix:/run/neffd/neffd.sock)");
ABSL_FLAG(std::string, admin_address, "",
          "the admin socket, for the commands marked (admin socket) and "
          "stats -z (default $NEFFD_ADMIN_ADDRESS, else "
          "unix:/run/neffd/admin.sock)");
ABSL_FLAG(bool, json, false, "print JSON instead of text");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate for a TCP address served with mutual TLS "
          "(with --tls-key and --tls-ca)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key for --tls-cert");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate that signed the daemon's certificate");
ABSL_FLAG(std::string, compiler_version, "",
          "neuronx-cc version of the entry (lookup, put, get, show, evict, "
          "forget); empty: the entry of any version");
ABSL_FLAG(std::string, namespace, "",
          "namespace: neff or hlo (verify, gc: default neff; ls: both)");
ABSL_FLAG(bool, all, false,
          "verify: every entry in the store, not only "
          "this host's index");
ABSL_FLAG(std::optional<neffd::config::ByteSizeFlag>, max_size, std::nullopt,
          "gc: shrink the store to this size (e.g. 500GiB, 1048576)");
ABSL_FLAG(std::optional<neffd::config::DurationFlag>, older_than, std::nullopt,
          "gc: remove entries not used for this long (e.g. 7d, 12h)");
ABSL_FLAG(bool, dry_run, false, "gc: only report what would be removed");
ABSL_FLAG(bool, clear_stale_locks, false,
          "import: remove lock files older than the lock timeout");
ABSL_FLAG(bool, z, false, "stats: print, then zero the counters");
ABSL_FLAG(bool, failed, false, "ls: recorded compile failures instead");
ABSL_FLAG(bool, locked, false, "ls: only entries with a lease out");
ABSL_FLAG(std::string, sort, "key", "ls: key, size or last_access");
ABSL_FLAG(std::string, limit, "0", "ls: at most this many rows (0: all)");
ABSL_FLAG(std::string, manifest, "",
          "warm: file of entries to pull, one 'NS VERSION KEY' per line");
ABSL_FLAG(std::optional<neffd::config::DurationFlag>, since, std::nullopt,
          "manifest: only entries used this recently (e.g. 7d, 12h)");
ABSL_FLAG(std::string, service, "",
          "health: the service to check (default: the daemon as a whole)");

namespace neffd::ctl {
namespace {

// One command line: the command and its positional arguments.
struct Call {
  std::string command;
  std::vector<std::string> args;
};

int LookupCommand(Ctl& ctl, const Call& call);
int PutCommand(Ctl& ctl, const Call& call);
int GetCommand(Ctl& ctl, const Call& call);
int ShowCommand(Ctl& ctl, const Call& call);
int EvictCommand(Ctl& ctl, const Call& call);
int ForgetCommand(Ctl& ctl, const Call& call);
int StatsCommand(Ctl& ctl, const Call& call);
int ListCommand(Ctl& ctl, const Call& call);
int LocksCommand(Ctl& ctl, const Call& call);
int DrainCommand(Ctl& ctl, const Call& call);
int HealthCommand(Ctl& ctl, const Call& call);
int ConfigCommand(Ctl& ctl, const Call& call);
int VerifyCommand(Ctl& ctl, const Call& call);
int GcCommand(Ctl& ctl, const Call& call);
int ImportCommand(Ctl& ctl, const Call& call);
int WhyCommand(Ctl& ctl, const Call& call);
int WarmCommand(Ctl& ctl, const Call& call);
int ManifestCommand(Ctl& ctl, const Call& call);
int DriftCommand(Ctl& ctl, const Call& call);
int DoctorCommand(Ctl& ctl, const Call& call);

// Every command: its positional arguments, what it does, the options it
// takes (flag names; --address and --json go with every command) and how
// it runs. Help and argument counts come from here.
struct Command {
  const char* name;
  const char* args;  // space-separated placeholders
  const char* summary;
  std::vector<const char*> options;
  int (*run)(Ctl& ctl, const Call& call);
};

const std::vector<Command>& Commands() {
  static const auto* commands = new std::vector<Command>{
      {"lookup",
       "NS KEY",
       "exit 0 if the entry is cached, 1 if not",
       {"compiler_version"},
       LookupCommand},
      {"put",
       "NS KEY FILE",
       "publish FILE as the entry",
       {"compiler_version"},
       PutCommand},
      {"get",
       "NS KEY OUT",
       "copy the cached entry to OUT",
       {"compiler_version"},
       GetCommand},
      {"show",
       "NS KEY",
       "the entry's record, state and lease",
       {"compiler_version"},
       ShowCommand},
      {"evict",
       "NS KEY",
       "remove the entry from the cache",
       {"compiler_version"},
       EvictCommand},
      {"forget",
       "NS KEY",
       "drop a recorded compile failure: the next caller compiles again",
       {"compiler_version"},
       ForgetCommand},
      {"stats", "", "the daemon's counters", {"z"}, StatsCommand},
      {"ls",
       "",
       "list cached entries",
       {"namespace", "compiler_version", "failed", "locked", "sort", "limit"},
       ListCommand},
      {"locks", "", "leases out on this host and who waits", {}, LocksCommand},
      {"drain",
       "",
       "stop granting leases (health NOT_SERVING)",
       {},
       DrainCommand},
      {"undrain", "", "grant leases again", {}, DrainCommand},
      {"health",
       "",
       "exit 0 if the daemon serves, 1 if not",
       {"service"},
       HealthCommand},
      {"config",
       "",
       "the daemon's settings and where each came from",
       {},
       ConfigCommand},
      {"verify",
       "",
       "re-hash entries; damaged ones are quarantined",
       {"all", "namespace"},
       VerifyCommand},
      {"gc",
       "",
       "remove least recently used entries, and leftovers past their bounds",
       {"max_size", "older_than", "dry_run", "namespace"},
       GcCommand},
      {"import",
       "DIR",
       "index the daemon's cache directory, or file a libneuronxla cache "
       "under neffcc's keys",
       {"clear_stale_locks"},
       ImportCommand},
      {"warm",
       "",
       "pull a manifest's entries from S3 into the shared store",
       {"manifest"},
       WarmCommand},
      {"manifest",
       "",
       "the entries this host used, for warm",
       {"since"},
       ManifestCommand},
      {"why",
       "NS KEY",
       "what KEY was derived from, and why it missed",
       {"compiler_version"},
       WhyCommand},
      {"drift",
       "",
       "inputs cached under more than one key",
       {"compiler_version", "namespace"},
       DriftCommand},
      {"doctor",
       "",
       "check this job's environment: compiler on PATH, daemon, directories, "
       "S3 (exit 0 only if all pass)",
       {},
       DoctorCommand},
  };
  return *commands;
}

const Command* FindCommand(absl::string_view name) {
  for (const Command& command : Commands()) {
    if (name == command.name) return &command;
  }
  return nullptr;
}

size_t ArgCount(const Command& command) {
  return std::vector<absl::string_view>(
             absl::StrSplit(command.args, ' ', absl::SkipEmpty()))
      .size();
}

// "--max-size=SIZE" as typed (dashes), with the flag's help.
std::string OptionHelp(const char* name) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
  std::string spelled = name;
  std::replace(spelled.begin(), spelled.end(), '_', '-');
  const std::string placeholder =
      flag != nullptr ? config::Placeholder(*flag) : "";
  return absl::StrCat("      --", spelled, placeholder.empty() ? "" : "=",
                      placeholder, "  ", flag != nullptr ? flag->Help() : "",
                      "\n");
}

// The CacheAdmin call behind a command that changes the cache; whether it
// needs the admin socket is neffd.proto's admin_only option.
absl::string_view ChangingCallOf(absl::string_view command) {
  static constexpr std::pair<absl::string_view, absl::string_view> kCalls[] = {
      {"evict", "Evict"},    {"forget", "Evict"}, {"gc", "Gc"},
      {"import", "Import"},  {"warm", "Warm"},    {"drain", "Drain"},
      {"undrain", "Undrain"}};
  for (const auto& [name, call] : kCalls) {
    if (name == command) return call;
  }
  return "";
}

std::string CommandHelp(const Command& command) {
  std::string help = absl::StrCat(
      "  ", command.name, *command.args ? " " : "", command.args, "\n      ",
      command.summary,
      IsAdminOnly(ChangingCallOf(command.name)) ? " (admin socket)" : "", "\n");
  for (const char* option : command.options) {
    absl::StrAppend(&help, OptionHelp(option));
  }
  return help;
}

std::string Help() {
  std::string help =
      "usage: neffctl [--address A] [--admin_address A] [--json] COMMAND "
      "[ARGS] [OPTIONS]\n"
      "       neffctl help [COMMAND]\n"
      "       neffctl --version\n\n"
      "Options for every command:\n";
  absl::StrAppend(&help, OptionHelp("address"), OptionHelp("admin_address"),
                  OptionHelp("json"), OptionHelp("tls_cert"),
                  OptionHelp("tls_key"), OptionHelp("tls_ca"),
                  "\nCommands (NS is neff or hlo):\n");
  for (const Command& command : Commands()) {
    absl::StrAppend(&help, CommandHelp(command));
  }
  absl::StrAppend(&help,
                  "\nExit codes: 0 success or hit, 1 miss (or nothing to do), "
                  "2 bad input or usage,\n3 daemon unreachable, 4 the daemon "
                  "failed or refused the operation.\n");
  return help;
}

std::string CommandNames() {
  std::vector<std::string> names;
  for (const Command& command : Commands()) names.push_back(command.name);
  return absl::StrJoin(names, ", ");
}

// `neffctl help [COMMAND]`.
int HelpCommand(const std::vector<std::string>& args) {
  if (args.size() > 1) {
    return Complain(kBadInput, "help takes at most one COMMAND");
  }
  if (args.empty()) {
    std::fputs(Help().c_str(), stdout);
    return 0;
  }
  const Command* command = FindCommand(args[0]);
  if (command == nullptr) {
    return Complain(kBadInput, absl::StrCat("no command '", args[0],
                                            "'; commands: ", CommandNames()));
  }
  std::fputs(CommandHelp(*command).c_str(), stdout);
  return 0;
}

// absl flags are identifiers; accept the dashed spellings users type.
std::vector<std::string> NormaliseFlags(int argc, char** argv) {
  std::vector<std::string> args(argv, argv + argc);
  for (std::string& arg : args) {
    if (arg == "--") break;
    if (arg.rfind("--", 0) != 0) continue;
    const size_t end = std::min(arg.find('='), arg.size());
    for (size_t i = 2; i < end; ++i) {
      if (arg[i] == '-') arg[i] = '_';
    }
  }
  return args;
}

// Without --compiler_version the entry of any version: a key commits to its
// compiler (TorchNeuron's 32-hex keys and neffcc's alike).
absl::StatusOr<EntryKey> ParseEntry(const Call& call) {
  return EntryKey::Parse(call.args[0], absl::GetFlag(FLAGS_compiler_version),
                         call.args[1]);
}

// Runs `entry_command` on the entry the call names.
template <typename F>
int WithEntry(const Call& call, F entry_command) {
  absl::StatusOr<EntryKey> id = ParseEntry(call);
  if (!id.ok()) return Complain(kBadInput, id.status().message());
  return entry_command(*id);
}

int LookupCommand(Ctl& ctl, const Call& call) {
  return WithEntry(call, [&](const EntryKey& id) { return ctl.Lookup(id); });
}

int PutCommand(Ctl& ctl, const Call& call) {
  return WithEntry(
      call, [&](const EntryKey& id) { return ctl.Put(id, call.args[2]); });
}

int GetCommand(Ctl& ctl, const Call& call) {
  return WithEntry(
      call, [&](const EntryKey& id) { return ctl.Get(id, call.args[2]); });
}

int ShowCommand(Ctl& ctl, const Call& call) {
  return WithEntry(call, [&](const EntryKey& id) { return ctl.Show(id); });
}

int EvictCommand(Ctl& ctl, const Call& call) {
  return WithEntry(call, [&](const EntryKey& id) { return ctl.Evict(id); });
}

int ForgetCommand(Ctl& ctl, const Call& call) {
  return WithEntry(call, [&](const EntryKey& id) {
    return ctl.Evict(id, /*failure_only=*/true);
  });
}

int StatsCommand(Ctl& ctl, const Call&) {
  return absl::GetFlag(FLAGS_z) ? ctl.ResetStats() : ctl.Stats();
}

int ListCommand(Ctl& ctl, const Call&) {
  v1::ListEntriesRequest request;
  request.set_namespace_(absl::GetFlag(FLAGS_namespace));
  request.set_compiler_version(absl::GetFlag(FLAGS_compiler_version));
  request.set_failed(absl::GetFlag(FLAGS_failed));
  request.set_locked(absl::GetFlag(FLAGS_locked));
  const std::string sort = absl::GetFlag(FLAGS_sort);
  v1::ListEntriesRequest::SortBy sort_by;
  if (!v1::ListEntriesRequest::SortBy_Parse(absl::AsciiStrToUpper(sort),
                                            &sort_by)) {
    return Complain(kBadInput, absl::StrCat("--sort '", sort,
                                            "': expected key, size or "
                                            "last_access"));
  }
  request.set_sort_by(sort_by);
  uint32_t limit = 0;
  if (!absl::SimpleAtoi(absl::GetFlag(FLAGS_limit), &limit)) {
    return Complain(kBadInput,
                    absl::StrCat("--limit '", absl::GetFlag(FLAGS_limit),
                                 "' is not a number of rows"));
  }
  request.set_limit(limit);
  return ctl.List(request);
}

int LocksCommand(Ctl& ctl, const Call&) { return ctl.Locks(); }

int DrainCommand(Ctl& ctl, const Call& call) {
  return ctl.Drain(call.command == "drain");
}

int HealthCommand(Ctl& ctl, const Call&) {
  return ctl.Health(absl::GetFlag(FLAGS_service));
}

int ConfigCommand(Ctl& ctl, const Call&) { return ctl.Config(); }

int VerifyCommand(Ctl& ctl, const Call&) {
  return ctl.Verify(absl::GetFlag(FLAGS_namespace), absl::GetFlag(FLAGS_all));
}

// A negative duration flag (the type takes "-1") is refused, naming it.
std::optional<int> RefuseNegative(
    absl::string_view name, const std::optional<config::DurationFlag>& d) {
  if (!d.has_value() || d->value >= absl::ZeroDuration()) return std::nullopt;
  return Complain(kBadInput,
                  absl::StrCat("--", name, ": \"", AbslUnparseFlag(*d),
                               "\" must not be negative"));
}

int GcCommand(Ctl& ctl, const Call&) {
  const std::optional<config::ByteSizeFlag> max_size =
      absl::GetFlag(FLAGS_max_size);
  const std::optional<config::DurationFlag> older_than =
      absl::GetFlag(FLAGS_older_than);
  if (std::optional<int> refused = RefuseNegative("older-than", older_than)) {
    return *refused;
  }
  // Without either goal gc removes no entry, only the store's leftovers
  // past their bounds (the daemon's --gc_temp_grace, --gc_quarantine_* and
  // --gc_trash_* flags).
  return ctl.Gc(
      absl::GetFlag(FLAGS_namespace),
      max_size.has_value() ? max_size->bytes : 0,
      older_than.has_value() ? older_than->value : absl::ZeroDuration(),
      absl::GetFlag(FLAGS_dry_run));
}

int ImportCommand(Ctl& ctl, const Call& call) {
  return ctl.Import(call.args[0], absl::GetFlag(FLAGS_clear_stale_locks));
}

int WarmCommand(Ctl& ctl, const Call&) {
  const std::string manifest = absl::GetFlag(FLAGS_manifest);
  if (manifest.empty()) {
    return Complain(kBadInput, "warm needs --manifest FILE");
  }
  return ctl.Warm(manifest);
}

int ManifestCommand(Ctl& ctl, const Call&) {
  const std::optional<config::DurationFlag> since = absl::GetFlag(FLAGS_since);
  if (std::optional<int> refused = RefuseNegative("since", since)) {
    return *refused;
  }
  return ctl.Manifest(since.has_value() ? since->value : absl::ZeroDuration());
}

int WhyCommand(Ctl& ctl, const Call& call) {
  return ctl.Why(call.args[0], call.args[1],
                 absl::GetFlag(FLAGS_compiler_version));
}

int DriftCommand(Ctl& ctl, const Call&) {
  return ctl.Drift(absl::GetFlag(FLAGS_namespace),
                   absl::GetFlag(FLAGS_compiler_version));
}

int DoctorCommand(Ctl& ctl, const Call&) { return ctl.Doctor(); }

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage("neffctl COMMAND; see neffctl --help");
  std::vector<std::string> normalised = NormaliseFlags(argc, argv);
  if (config::AsksForHelp(normalised)) {
    std::fputs(Help().c_str(), stdout);
    return 0;
  }
  if (config::AsksForVersion(normalised)) {
    std::puts(config::VersionLine("neffctl").c_str());
    return 0;
  }
  if (std::vector<std::string> errors = config::CheckFlags(normalised);
      !errors.empty()) {
    return Complain(kBadInput, absl::StrCat(errors[0], "; see neffctl --help"));
  }
  std::vector<char*> raw;
  for (std::string& a : normalised) raw.push_back(a.data());
  std::vector<char*> args =
      absl::ParseCommandLine(static_cast<int>(raw.size()), raw.data());
  if (args.size() < 2) {
    return Complain(kBadInput,
                    absl::StrCat("no command; commands: ", CommandNames(),
                                 " (see neffctl --help)"));
  }
  Call call{args[1], std::vector<std::string>(args.begin() + 2, args.end())};
  if (call.command == "help") return HelpCommand(call.args);
  const Command* command = FindCommand(call.command);
  if (command == nullptr) {
    return Complain(kBadInput, absl::StrCat("unknown command '", call.command,
                                            "'; commands: ", CommandNames()));
  }
  if (const size_t want = ArgCount(*command); call.args.size() != want) {
    return Complain(kBadInput,
                    want == 0
                        ? absl::StrCat(command->name, " takes no arguments")
                        : absl::StrCat(command->name, " takes ", want,
                                       " arguments (", command->args,
                                       "); see neffctl help ", command->name));
  }
  absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
      CredentialsFor({absl::GetFlag(FLAGS_tls_cert),
                      absl::GetFlag(FLAGS_tls_key),
                      absl::GetFlag(FLAGS_tls_ca)});
  if (!credentials.ok()) {
    return Complain(kBadInput, credentials.status().message());
  }
  Ctl ctl(absl::GetFlag(FLAGS_address), absl::GetFlag(FLAGS_admin_address),
          *std::move(credentials), absl::GetFlag(FLAGS_json));
  return command->run(ctl, call);
}

}  // namespace
}  // namespace neffd::ctl

int main(int argc, char** argv) { return neffd::ctl::Main(argc, argv); }
