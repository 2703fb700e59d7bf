// neffctl: the operator and scripting CLI for neffd.
//
//   neffctl [--address A] [--json] lookup NS KEY --compiler_version V
//   neffctl [--address A] [--json] put NS KEY FILE --compiler_version V
//   neffctl [--address A] [--json] get NS KEY OUT --compiler_version V
//   neffctl [--address A] [--json] stats
//   neffctl [--address A] [--json] evict NS KEY --compiler_version V
//   neffctl [--address A] [--json] verify [--all] [--namespace NS]
//   neffctl [--address A] [--json] gc --max-size BYTES [--older-than AGE]
//                                     [--dry-run] [--namespace NS]
//   neffctl [--address A] [--json] import DIR [--clear-stale-locks]
//
// Flags may be spelled with '-' or '_'. Exit codes: 0 success or hit, 1 miss
// (or a recorded failure / lock timeout / nothing to evict), 2 bad input or
// usage (one line on stderr), 3 daemon unreachable, 4 the daemon failed the
// operation.
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "client/neffctl/ctl.h"

ABSL_FLAG(std::string, address, "",
          "daemon address (default $NEFFD_ADDRESS, else "
          "unix:/run/neffd/neffd.sock)");
ABSL_FLAG(bool, json, false, "print JSON instead of text");
ABSL_FLAG(std::string, compiler_version, "",
          "neuronx-cc version of the entry (lookup, put, get, evict)");
ABSL_FLAG(std::string, namespace, "neff", "namespace (verify, gc)");
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

namespace neffd::ctl {
namespace {

constexpr char kUsage[] =
    "usage: neffctl [--address A] [--json] {lookup NS KEY | put NS KEY FILE "
    "| get NS KEY OUT | evict NS KEY} --compiler_version V | stats | verify "
    "[--all] | gc --max-size BYTES [--older-than AGE] [--dry-run] | import "
    "DIR [--clear-stale-locks]";

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

int EntryCommand(Ctl& ctl, const std::string& command,
                 const std::vector<char*>& args) {
  const size_t want = (command == "lookup" || command == "evict") ? 2 : 3;
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
  if (command == "put") return ctl.Put(*id, args[4]);
  return ctl.Get(*id, args[4]);
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<std::string> normalised = NormaliseFlags(argc, argv);
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
      command == "evict") {
    return EntryCommand(ctl, command, args);
  }
  if (command == "stats" || command == "verify" || command == "gc") {
    if (positional != 0) {
      return Complain(kBadInput, absl::StrCat(command, " takes no arguments"));
    }
    if (command == "stats") return ctl.Stats();
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
