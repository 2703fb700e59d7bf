#include "config/env.h"

#include <pwd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "config/parse.h"

extern char** environ;

namespace neffd::config {
namespace {

// Prefixes whose unknown names are checked for typos.
constexpr absl::string_view kCheckedPrefixes[] = {"TORCH_NEURONX_", "NEURON_",
                                                  "NEFFD_"};

// The first version whose default for TORCH_NEURONX_COMPLEX_DECOMPOSE is on.
constexpr std::pair<int, int> kComplexDecomposeSince = {2, 13};

[[noreturn]] void Die(const std::string& message) {
  std::fprintf(stderr, "neffd config: %s\n", message.c_str());
  std::abort();
}

template <typename T>
absl::StatusOr<T> Check(const absl::Status& status, T value) {
  if (!status.ok()) return status;
  return value;
}

// Like Python's getpass.getuser(): LOGNAME, USER, LNAME, USERNAME, then the
// password database.
std::string UserName(const std::map<std::string, std::string>& env, uid_t uid) {
  for (const char* name : {"LOGNAME", "USER", "LNAME", "USERNAME"}) {
    auto it = env.find(name);
    if (it != env.end() && !it->second.empty()) return it->second;
  }
  struct passwd entry;
  struct passwd* result = nullptr;
  char buffer[4096];
  if (getpwuid_r(uid, &entry, buffer, sizeof(buffer), &result) == 0 &&
      result != nullptr) {
    return result->pw_name;
  }
  return absl::StrCat(uid);
}

}  // namespace

// Builds one EnvSnapshot: defaults, then the environment, then the rules
// that span variables, then the typo check.
class SnapshotBuilder {
 public:
  using Value = EnvSnapshot::Value;

  SnapshotBuilder(const std::map<std::string, std::string>& env,
                  const SnapshotOptions& options)
      : env_(env), options_(options) {}

  EnvSnapshot Build() {
    absl::Span<const VarSpec> specs = Variables();
    snapshot_.entries_.resize(specs.size());
    per_variable_warnings_.resize(specs.size());
    for (size_t i = 0; i < specs.size(); ++i) Read(i);
    for (size_t i = 0; i < specs.size(); ++i) ApplyRequires(i);
    for (const std::vector<std::string>& warnings : per_variable_warnings_) {
      for (const std::string& w : warnings) snapshot_.warnings_.push_back(w);
    }
    CheckUnknownNames();
    return std::move(snapshot_);
  }

 private:
  static absl::StatusOr<Value> Parse(const VarSpec& spec,
                                     absl::string_view text) {
    using internal::ParseIntList;
    using internal::ParseNameList;
    switch (spec.rule) {
      case Rule::kBool:
        return internal::ParseBool(text);
      case Rule::kBool01:
        if (text == "0" || text == "1") return text == "1";
        return absl::InvalidArgumentError("expected 0 or 1 (nothing else)");
      case Rule::kOnlyOneOn:
        return text == "1";
      case Rule::kInt:
        return internal::ParseDecimal(text, spec.min, spec.max);
      case Rule::kIntList:
      case Rule::kIndexRanges:
        return ParseIntList(text, spec.min, spec.max,
                            spec.rule == Rule::kIndexRanges);
      case Rule::kChoices:
        return ParseNameList(text, spec.choices);
      case Rule::kNames:
        return ParseNameList(text, "");
      case Rule::kAnyString:
        return std::string(text);
      case Rule::kNonEmpty:
        return Check(text.empty() ? absl::InvalidArgumentError(
                                        "expected a non-empty value")
                                  : absl::OkStatus(),
                     std::string(text));
      case Rule::kAbsolutePath:
        return Check(absl::StartsWith(text, "/")
                         ? absl::OkStatus()
                         : absl::InvalidArgumentError(
                               "expected an absolute path (the daemon and "
                               "the ranks run in different directories)"),
                     std::string(text));
      case Rule::kPlatform:
        return Check(internal::CheckPlatform(text), std::string(text));
      case Rule::kAddress:
        return Check(internal::CheckAddress(text), std::string(text));
    }
    return absl::InternalError("unknown rule");
  }

  // Sets the default of `spec` into `entry`: a constant or derived value.
  void Default(const VarSpec& spec, EnvSnapshot::Entry* entry) const {
    const uid_t uid = options_.uid.value_or(getuid());
    switch (spec.derivation) {
      case Derivation::kNone:
        if (spec.default_value != nullptr) {
          absl::StatusOr<Value> value = Parse(spec, spec.default_value);
          if (!value.ok()) Die(absl::StrCat(spec.name, ": bad default"));
          entry->value = *std::move(value);
        }
        return;
      case Derivation::kStream:
        entry->value = true;
        entry->note = "unset: true on the default stream, false on others";
        return;
      case Derivation::kTorchVersion:
        DeriveFromTorchVersion(entry);
        return;
      case Derivation::kInstanceType:
        DeriveFromInstanceType(entry);
        return;
      case Derivation::kUserName: {
        std::string user = options_.user_name.empty() ? UserName(env_, uid)
                                                      : options_.user_name;
        // PyTorch replaces the characters Windows forbids in file names.
        std::string sanitized = user;
        for (char& c : sanitized) {
          if (absl::string_view("\\/:*?\"<>|").find(c) !=
              absl::string_view::npos) {
            c = '_';
          }
        }
        entry->value = absl::StrCat("/tmp/torchinductor_", sanitized, "/");
        entry->origin = Origin::kDerived;
        entry->note = absl::StrCat("from user name ", user);
        return;
      }
      case Derivation::kUid:
        entry->value = absl::StrCat("/var/tmp/nki-trace-cache-", uid, "/");
        entry->origin = Origin::kDerived;
        entry->note = absl::StrCat("from uid ", uid);
        return;
    }
  }

  void DeriveFromTorchVersion(EnvSnapshot::Entry* entry) const {
    entry->origin = Origin::kDerived;
    entry->value = false;
    if (options_.torch_version.empty()) {
      entry->note = "PyTorch version unknown; false (pass --torch_version)";
      return;
    }
    absl::StatusOr<std::pair<int, int>> version =
        internal::ParseTorchVersion(options_.torch_version);
    if (!version.ok()) {
      entry->note = absl::StrCat(version.status().message(), "; false");
      return;
    }
    entry->value = *version >= kComplexDecomposeSince;
    entry->note = absl::StrCat("from PyTorch ", options_.torch_version);
  }

  void DeriveFromInstanceType(EnvSnapshot::Entry* entry) const {
    entry->origin = Origin::kDerived;
    std::ifstream file(options_.product_name_path);
    std::stringstream contents;
    contents << file.rdbuf();
    if (!file) {
      entry->note = absl::StrCat("cannot read ", options_.product_name_path,
                                 "; not a Trainium instance");
      return;
    }
    std::string product(absl::StripAsciiWhitespace(contents.str()));
    std::optional<std::string> platform =
        internal::PlatformFromInstanceType(product);
    if (!platform) {
      entry->note = absl::StrCat("instance type \"", absl::CEscape(product),
                                 "\" is not Trainium");
      return;
    }
    entry->value = *platform;
    entry->note = absl::StrCat("from instance type ", product);
  }

  void Read(size_t i) {
    const VarSpec& spec = Variables()[i];
    EnvSnapshot::Entry& entry = snapshot_.entries_[i];
    Default(spec, &entry);
    auto it = env_.find(spec.name);
    if (it == env_.end()) return;
    absl::StatusOr<Value> value = Parse(spec, it->second);
    if (value.ok()) {
      entry.value = *std::move(value);
      entry.origin = Origin::kEnv;
      entry.note.clear();
      return;
    }
    entry.origin = Origin::kInvalid;
    per_variable_warnings_[i].push_back(
        absl::StrCat(spec.name, "=\"", absl::CEscape(it->second),
                     "\" is invalid: ", value.status().message(),
                     "; using the default ", snapshot_.FormatValue(spec.name)));
  }

  // A bool that needs another bool is false while that one is false.
  void ApplyRequires(size_t i) {
    const VarSpec& spec = Variables()[i];
    if (spec.requires_true == nullptr) return;
    EnvSnapshot::Entry& entry = snapshot_.entries_[i];
    if (!std::get<bool>(entry.value) || snapshot_.GetBool(spec.requires_true)) {
      return;
    }
    entry.value = false;
    entry.origin = Origin::kDerived;
    entry.note = absl::StrCat("forced false: ", spec.requires_true, " is off");
    auto it = env_.find(spec.name);
    std::string given = it == env_.end() ? "true" : absl::CEscape(it->second);
    per_variable_warnings_[i].push_back(absl::StrCat(
        spec.name, "=\"", given, "\" has no effect while ", spec.requires_true,
        " is off; using false (set ", spec.requires_true, "=1)"));
  }

  void CheckUnknownNames() {
    for (const auto& [name, value] : env_) {
      bool checked = false;
      for (absl::string_view prefix : kCheckedPrefixes) {
        checked = checked || absl::StartsWith(name, prefix);
      }
      if (!checked || FindVariable(name) != nullptr) continue;
      if (const VarSpec* suggestion = SuggestVariable(name)) {
        snapshot_.warnings_.push_back(absl::StrCat("unknown variable ", name,
                                                   "; did you mean ",
                                                   suggestion->name, "?"));
      }
    }
  }

  const std::map<std::string, std::string>& env_;
  const SnapshotOptions& options_;
  EnvSnapshot snapshot_;
  std::vector<std::vector<std::string>> per_variable_warnings_;
};

EnvSnapshot EnvSnapshot::FromProcessEnvironment(
    const SnapshotOptions& options) {
  std::map<std::string, std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    absl::string_view text(*entry);
    size_t equals = text.find('=');
    if (equals == absl::string_view::npos) continue;
    // Like getenv(), the first definition of a name wins.
    env.emplace(std::string(text.substr(0, equals)),
                std::string(text.substr(equals + 1)));
  }
  return FromMap(env, options);
}

EnvSnapshot EnvSnapshot::FromMap(const std::map<std::string, std::string>& env,
                                 const SnapshotOptions& options) {
  return SnapshotBuilder(env, options).Build();
}

const EnvSnapshot::Entry& EnvSnapshot::EntryFor(
    absl::string_view name, const char* caller,
    std::initializer_list<Type> types) const {
  const VarSpec* spec = FindVariable(name);
  if (spec == nullptr) {
    Die(absl::StrCat("EnvSnapshot::", caller, "(\"", name,
                     "\"): no such variable in config/registry.cc"));
  }
  bool type_ok = types.size() == 0;
  for (Type type : types) type_ok = type_ok || spec->type == type;
  if (!type_ok) {
    Die(absl::StrCat("EnvSnapshot::", caller, "(\"", name, "\"): ", name,
                     " is of type ", TypeName(spec->type)));
  }
  return entries_[spec - Variables().data()];
}

bool EnvSnapshot::GetBool(absl::string_view name) const {
  return std::get<bool>(EntryFor(name, "GetBool", {Type::kBool}).value);
}

int64_t EnvSnapshot::GetInt(absl::string_view name) const {
  return std::get<int64_t>(EntryFor(name, "GetInt", {Type::kInt}).value);
}

const std::string& EnvSnapshot::GetString(absl::string_view name) const {
  static const std::string* const kEmpty = new std::string();
  const Value& value =
      EntryFor(name, "GetString", {Type::kString, Type::kPath}).value;
  const std::string* text = std::get_if<std::string>(&value);
  return text != nullptr ? *text : *kEmpty;
}

std::vector<int64_t> EnvSnapshot::GetIntList(absl::string_view name) const {
  return std::get<std::vector<int64_t>>(
      EntryFor(name, "GetIntList", {Type::kIntList}).value);
}

std::vector<std::string> EnvSnapshot::GetStringList(
    absl::string_view name) const {
  return std::get<std::vector<std::string>>(
      EntryFor(name, "GetStringList", {Type::kStringList}).value);
}

bool EnvSnapshot::IsSet(absl::string_view name) const {
  return !std::holds_alternative<std::monostate>(
      EntryFor(name, "IsSet", {}).value);
}

Origin EnvSnapshot::origin(absl::string_view name) const {
  return EntryFor(name, "origin", {}).origin;
}

const std::string& EnvSnapshot::note(absl::string_view name) const {
  return EntryFor(name, "note", {}).note;
}

std::string EnvSnapshot::FormatValue(absl::string_view name) const {
  struct Formatter {
    std::string operator()(std::monostate) const { return "(unset)"; }
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return absl::StrCat(i); }
    std::string operator()(const std::string& s) const { return s; }
    std::string operator()(const std::vector<int64_t>& v) const {
      return absl::StrJoin(v, ",");
    }
    std::string operator()(const std::vector<std::string>& v) const {
      return absl::StrJoin(v, ",");
    }
  };
  return std::visit(Formatter(), EntryFor(name, "FormatValue", {}).value);
}

bool EnvSnapshot::SplitEnabled(absl::string_view name,
                               bool default_stream) const {
  if (origin(name) == Origin::kEnv) return GetBool(name);
  // With streams off every stream aliases the default stream.
  return default_stream || !GetBool("TORCH_NEURONX_ENABLE_STREAMS");
}

bool EnvSnapshot::SplitAllgatherEnabled(bool default_stream) const {
  return SplitEnabled("NEURON_USE_SPLIT_ALLGATHER", default_stream);
}

bool EnvSnapshot::SplitReduceScatterEnabled(bool default_stream) const {
  return SplitEnabled("NEURON_USE_SPLIT_REDUCE_SCATTER", default_stream);
}

}  // namespace neffd::config
