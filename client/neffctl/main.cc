// neffctl: the operator and scripting CLI for neffd.
//
//   neffctl [--address A] [--json] lookup NS KEY --compiler_version V
//   neffctl [--address A] [--json] put NS KEY FILE --compiler_version V
//   neffctl [--address A] [--json] get NS KEY OUT --compiler_version V
//   neffctl [--address A] [--json] stats [-z]
//   neffctl [--address A] [--json] ls [--namespace NS] [--compiler_version V]
//                                     [--failed] [--locked]
//                                     [--sort key|size|last_access] [--limit N]
//   neffctl [--address A] [--json] show NS KEY --compiler_version V
//   neffctl [--address A] [--json] locks
//   neffctl [--address A] [--json] drain | undrain
//   neffctl [--address A] [--json] health [--service NAME]
//   neffctl [--address A] [--json] config
//   neffctl [--address A] [--json] evict NS KEY --compiler_version V
//   neffctl [--address A] [--json] verify [--all] [--namespace NS]
//   neffctl [--address A] [--json] gc --max-size BYTES [--older-than AGE]
//                                     [--dry-run] [--namespace NS]
//   neffctl [--address A] [--json] import DIR [--clear-stale-locks]
//   neffctl [--address A] [--json] why NS KEY [--compiler_version V]
//   neffctl [--address A] [--json] drift [--compiler_version V]
//                                        [--namespace NS]
//
// Flags may be spelled with '-' or '_'. Exit codes: 0 success or hit, 1 miss
// (or a recorded failure / lock timeout / nothing to evict / no such entry /
// health NOT_SERVING / no record of a key's inputs), 2 bad input or usage (one
// line on stderr), 3 daemon unreachable, 4 the daemon failed the operation.
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/neffctl/ctl.h"

ABSL_FLAG(std::string, address, "",
          "daemon address (default $NEFFD_ADDRESS, else "
          "unix:/run/neffd/neffd.sock)");
ABSL_FLAG(bool, json, false, "print JSON instead of text");
ABSL_FLAG(std::string, compiler_version, "",
          "neuronx-cc version of the entry (lookup, put, get, evict)");
ABSL_FLAG(std::string, namespace, "",
          "namespace: neff or hlo (verify, gc: default neff; ls: both)");
ABSL_FLAG(bool, all, false,
          "verify: every entry in the store, not only "
          "this host's index");
ABSL_FLAG(std::string, max_size, "",
          "gc: shrink the store to this size "
          "(bytes, or with K/M/G/T suffix)");
ABSL_FLAG(std::string, older_than, "",
          "gc: remove entries not used for this long (e.g. 7d, 12h)");
ABSL_FLAG(bool, dry_run, false, "gc: only report what would be removed");
ABSL_FLAG(bool, clear_stale_locks, false,
          "import: remove lock files older than the lock timeout");
ABSL_FLAG(bool, z, false, "stats: print, then zero the counters");
ABSL_FLAG(bool, failed, false, "ls: recorded compile failures instead");
ABSL_FLAG(bool, locked, false, "ls: only entries with a lease out");
ABSL_FLAG(std::string, sort, "key", "ls: key, size or last_access");
ABSL_FLAG(std::string, limit, "0", "ls: at most this many rows (0: all)");
ABSL_FLAG(std::string, service, "",
          "health: the service to check (default: the daemon as a whole)");

namespace neffd::ctl {
namespace {

constexpr char kUsage[] =
    "usage: neffctl [--address A] [--json] {lookup NS KEY | put NS KEY FILE "
    "| get NS KEY OUT | show NS KEY | evict NS KEY} --compiler_version V | "
    "stats [-z] | ls [--namespace NS] [--compiler_version V] [--failed] "
    "[--locked] [--sort key|size|last_access] [--limit N] | locks | drain | "
    "undrain | health [--service S] | config | verify [--all] | gc "
    "--max-size BYTES [--older-than AGE] [--dry-run] | import DIR "
    "[--clear-stale-locks] | why NS KEY [--compiler_version V] | drift "
    "[--compiler_version V]";

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

// absl would exit 1 with its own message on an unknown flag or a bad value;
// check first so that every bad argument is one line and exit code 2.
bool CheckFlags(const std::vector<std::string>& args, std::string* error) {
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    std::string name = arg.substr(arg[1] == '-' ? 2 : 1);
    const size_t eq = name.find('=');
    const bool has_value = eq != std::string::npos;
    const std::string value = has_value ? name.substr(eq + 1) : "";
    if (has_value) name.resize(eq);
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && name.rfind("no", 0) == 0 && !has_value) {
      flag = absl::FindCommandLineFlag(name.substr(2));
      if (flag != nullptr && flag->IsOfType<bool>()) continue;
      flag = nullptr;
    }
    if (flag == nullptr) {
      *error = absl::StrCat("unknown flag '", arg, "'; ", kUsage);
      return false;
    }
    if (flag->IsOfType<bool>() && !has_value) continue;
    if (!has_value && i + 1 >= args.size()) {
      *error = absl::StrCat("flag '", arg, "' needs a value");
      return false;
    }
    std::string why;
    const std::string given = has_value ? value : args[++i];
    if (!flag->ParseFrom(given, &why)) {
      *error = absl::StrCat("flag '--", name, "': bad value '", given, "'");
      return false;
    }
  }
  return true;
}

int ListCommand(Ctl& ctl) {
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

int EntryCommand(Ctl& ctl, const std::string& command,
                 const std::vector<char*>& args) {
  const size_t want =
      (command == "lookup" || command == "evict" || command == "show") ? 2 : 3;
  if (args.size() - 2 != want) {
    return Complain(kBadInput, absl::StrCat(command, " takes ", want,
                                            " arguments; ", kUsage));
  }
  if (absl::GetFlag(FLAGS_compiler_version).empty()) {
    return Complain(kBadInput,
                    absl::StrCat(command, " needs --compiler_version"));
  }
  absl::StatusOr<EntryKey> id =
      EntryKey::Parse(args[2], absl::GetFlag(FLAGS_compiler_version), args[3]);
  if (!id.ok()) return Complain(kBadInput, id.status().message());
  if (command == "lookup") return ctl.Lookup(*id);
  if (command == "evict") return ctl.Evict(*id);
  if (command == "show") return ctl.Show(*id);
  if (command == "put") return ctl.Put(*id, args[4]);
  return ctl.Get(*id, args[4]);
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<std::string> normalised = NormaliseFlags(argc, argv);
  if (std::string error; !CheckFlags(normalised, &error)) {
    return Complain(kBadInput, error);
  }
  std::vector<char*> raw;
  for (std::string& a : normalised) raw.push_back(a.data());
  std::vector<char*> args =
      absl::ParseCommandLine(static_cast<int>(raw.size()), raw.data());
  if (args.size() < 2) return Complain(kBadInput, kUsage);
  const std::string command = args[1];
  const size_t positional = args.size() - 2;
  Ctl ctl(absl::GetFlag(FLAGS_address), absl::GetFlag(FLAGS_json));
  const std::string ns = absl::GetFlag(FLAGS_namespace);
  if (command == "lookup" || command == "put" || command == "get" ||
      command == "evict" || command == "show") {
    return EntryCommand(ctl, command, args);
  }
  if (command == "stats" || command == "verify" || command == "gc" ||
      command == "ls" || command == "locks" || command == "drain" ||
      command == "undrain" || command == "health" || command == "config") {
    if (positional != 0) {
      return Complain(kBadInput, absl::StrCat(command, " takes no arguments"));
    }
    if (command == "stats") {
      return absl::GetFlag(FLAGS_z) ? ctl.ResetStats() : ctl.Stats();
    }
    if (command == "ls") return ListCommand(ctl);
    if (command == "locks") return ctl.Locks();
    if (command == "drain" || command == "undrain") {
      return ctl.Drain(command == "drain");
    }
    if (command == "health") return ctl.Health(absl::GetFlag(FLAGS_service));
    if (command == "config") return ctl.Config();
    if (command == "verify") return ctl.Verify(ns, absl::GetFlag(FLAGS_all));
    uint64_t max_size = 0;
    absl::Duration older_than;
    const std::string size_text = absl::GetFlag(FLAGS_max_size);
    const std::string age_text = absl::GetFlag(FLAGS_older_than);
    if (size_text.empty() && age_text.empty()) {
      return Complain(kBadInput, "gc needs --max-size and/or --older-than");
    }
    if (!size_text.empty() && !ParseBytes(size_text, &max_size)) {
      return Complain(kBadInput,
                      absl::StrCat("--max-size '", size_text,
                                   "' is not a size (e.g. 500G, 1048576)"));
    }
    if (!age_text.empty() && !ParseAge(age_text, &older_than)) {
      return Complain(kBadInput,
                      absl::StrCat("--older-than '", age_text,
                                   "' is not a duration (e.g. 7d, 12h)"));
    }
    return ctl.Gc(ns, max_size, older_than, absl::GetFlag(FLAGS_dry_run));
  }
  if (command == "why") {
    if (positional != 2) return Complain(kBadInput, "why takes NS KEY");
    return ctl.Why(args[2], args[3], absl::GetFlag(FLAGS_compiler_version));
  }
  if (command == "drift") {
    if (positional != 0) return Complain(kBadInput, "drift takes no arguments");
    return ctl.Drift(ns, absl::GetFlag(FLAGS_compiler_version));
  }
  if (command == "import") {
    if (positional != 1) return Complain(kBadInput, "import takes one DIR");
    return ctl.Import(args[2], absl::GetFlag(FLAGS_clear_stale_locks));
  }
  return Complain(kBadInput,
                  absl::StrCat("unknown command '", command, "'; ", kUsage));
}

}  // namespace
}  // namespace neffd::ctl

int main(int argc, char** argv) { return neffd::ctl::Main(argc, argv); }
