#include "client/neffcc/command_line.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace neffd::neffcc {
namespace {

constexpr char kUsage[] =
    "usage: neffcc neuronx-cc ARGS... | neffcc /path/to/neuronx-cc ARGS... "
    "(or a symlink named neuronx-cc to neffcc)";
constexpr char kNotACompile[] = "not a compile";

enum class Arity { kNone, kOne, kMany };
enum class Keyed { kYes, kNo };

struct Option {
  absl::string_view name;
  absl::string_view canonical;  // what the key calls it
  Arity arity;
  Keyed keyed;
};

// neuronx-cc's options whose shape neffcc must know (neuronx-cc compile
// --help): those taking values, those taking none that would otherwise look
// like they take the input, and the aliases of one setting.
constexpr Option kOptions[] = {
    {"--output", "--output", Arity::kOne, Keyed::kNo},
    {"--logfile", "--logfile", Arity::kOne, Keyed::kNo},
    {"--workdir", "--workdir", Arity::kOne, Keyed::kNo},
    {"--verbose", "--verbose", Arity::kOne, Keyed::kNo},
    {"--target", "--target", Arity::kOne, Keyed::kYes},
    {"--framework", "--framework", Arity::kOne, Keyed::kYes},
    {"--model-type", "--model-type", Arity::kOne, Keyed::kYes},
    {"--auto-cast", "--auto-cast", Arity::kOne, Keyed::kYes},
    {"--auto-cast-type", "--auto-cast-type", Arity::kOne, Keyed::kYes},
    {"--distribution-strategy", "--distribution-strategy", Arity::kOne,
     Keyed::kYes},
    {"--lnc", "--lnc", Arity::kOne, Keyed::kYes},
    {"--logical-nc-config", "--lnc", Arity::kOne, Keyed::kYes},
    {"--optlevel", "--optlevel", Arity::kOne, Keyed::kYes},
    {"-O", "--optlevel", Arity::kOne, Keyed::kYes},
    {"--pipeline", "--pipeline", Arity::kMany, Keyed::kYes},
    {"--tensorizer-options", "--tensorizer-options", Arity::kOne, Keyed::kYes},
    {"--internal-hlo2tensorizer-options", "--internal-hlo2tensorizer-options",
     Arity::kOne, Keyed::kYes},
    {"--internal-backend-options", "--internal-backend-options", Arity::kOne,
     Keyed::kYes},
    {"--enable-internal-neff-wrapper", "--enable-internal-neff-wrapper",
     Arity::kNone, Keyed::kYes},
    {"--enable-fast-loading-neuron-binaries",
     "--enable-fast-loading-neuron-binaries", Arity::kNone, Keyed::kYes},
    {"--enable-saturate-infinity", "--enable-saturate-infinity", Arity::kNone,
     Keyed::kYes},
    {"--enable-mixed-precision-accumulation",
     "--enable-mixed-precision-accumulation", Arity::kNone, Keyed::kYes},
    {"--help", "--help", Arity::kNone, Keyed::kNo},
    {"-h", "--help", Arity::kNone, Keyed::kNo},
};

const Option* FindOption(absl::string_view name) {
  auto it = std::find_if(std::begin(kOptions), std::end(kOptions),
                         [&](const Option& o) { return o.name == name; });
  return it == std::end(kOptions) ? nullptr : &*it;
}

absl::string_view BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

bool IsFlag(absl::string_view arg) { return arg.size() > 1 && arg[0] == '-'; }

// One option with its values, or a positional argument (empty name).
struct Item {
  std::string name;  // canonical for a known option
  const Option* option = nullptr;
  std::vector<std::string> values;
  ArgPath value_at;  // the first value
  // "--unknown v" after the subcommand: v may be the value or the input.
  bool value_may_be_input = false;
};

struct Split {
  std::string subcommand;
  std::vector<Item> items;
};

// Reads one option starting at args[i]; advances i past its values.
Item ReadOption(absl::Span<const std::string> args, size_t& i,
                bool after_subcommand) {
  absl::string_view arg = args[i];
  Item item;
  absl::string_view name = arg;
  bool inline_value = false;
  if (const size_t eq = arg.find('=');
      absl::StartsWith(arg, "--") && eq != absl::string_view::npos) {
    name = arg.substr(0, eq);
    item.values.emplace_back(arg.substr(eq + 1));
    item.value_at = {i, eq + 1};
    inline_value = true;
  } else if (absl::StartsWith(arg, "-O") && arg.size() > 2) {
    name = "-O";  // -O2
    item.values.emplace_back(arg.substr(2));
    item.value_at = {i, 2};
    inline_value = true;
  }
  item.option = FindOption(name);
  item.name = std::string(item.option ? item.option->canonical : name);
  if (inline_value) return item;
  auto next_is_value = [&] {
    return i + 1 < args.size() && !IsFlag(args[i + 1]);
  };
  if (item.option != nullptr) {
    if (item.option->arity == Arity::kNone || !next_is_value()) return item;
    item.value_at = {i + 1, 0};
    do {
      item.values.push_back(args[++i]);
    } while (item.option->arity == Arity::kMany && next_is_value());
    return item;
  }
  // Unknown: before the subcommand, "compile" is the subcommand, not a value.
  if (absl::StartsWith(arg, "--") && next_is_value() &&
      (after_subcommand || args[i + 1] != "compile")) {
    item.value_at = {i + 1, 0};
    item.values.push_back(args[++i]);
    item.value_may_be_input = after_subcommand;
  }
  return item;
}

Split SplitArgs(absl::Span<const std::string> args) {
  Split split;
  for (size_t i = 0; i < args.size(); ++i) {
    if (IsFlag(args[i])) {
      split.items.push_back(ReadOption(args, i, !split.subcommand.empty()));
    } else if (split.subcommand.empty()) {
      split.subcommand = args[i];
    } else {
      Item positional;
      positional.values.push_back(args[i]);
      positional.value_at = {i, 0};
      split.items.push_back(std::move(positional));
    }
  }
  return split;
}

absl::Status FindInput(std::vector<Item>& items, CompileCommand& command) {
  std::vector<Item*> positionals, maybe_inputs;
  for (Item& item : items) {
    if (item.name.empty()) positionals.push_back(&item);
    if (item.value_may_be_input) maybe_inputs.push_back(&item);
  }
  if (positionals.size() == 1) {
    command.input = positionals[0]->values[0];
    command.input_at = positionals[0]->value_at;
    return absl::OkStatus();
  }
  if (positionals.empty() && maybe_inputs.size() == 1) {
    // "--unknown INPUT": the option is a bare one.
    Item& item = *maybe_inputs[0];
    command.input = std::move(item.values[0]);
    command.input_at = item.value_at;
    item.values.clear();
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      positionals.empty() && maybe_inputs.empty()
          ? "no input file"
          : "cannot tell which argument is the input file");
}

}  // namespace

absl::StatusOr<NeffccArgs> ParseNeffccArgs(absl::Span<const std::string> argv) {
  if (argv.empty()) return absl::InvalidArgumentError(kUsage);
  NeffccArgs out;
  if (BaseName(argv[0]) == kCompilerName) {
    out.compiler_args.assign(argv.begin() + 1, argv.end());
    return out;
  }
  if (argv.size() < 2 || BaseName(argv[1]) != kCompilerName) {
    return absl::InvalidArgumentError(
        argv.size() < 2 ? std::string(kUsage)
                        : absl::StrCat("'", argv[1], "' is not ", kCompilerName,
                                       "; ", kUsage));
  }
  if (absl::StrContains(argv[1], '/')) out.explicit_compiler = argv[1];
  out.compiler_args.assign(argv.begin() + 2, argv.end());
  return out;
}

bool IsNotACompile(const absl::Status& status) {
  return absl::IsFailedPrecondition(status) && status.message() == kNotACompile;
}

absl::StatusOr<CompileCommand> ParseCompile(
    absl::Span<const std::string> args) {
  Split split = SplitArgs(args);
  if (split.subcommand != "compile") {
    return absl::FailedPreconditionError(kNotACompile);
  }
  CompileCommand command;
  if (absl::Status s = FindInput(split.items, command); !s.ok()) return s;
  std::vector<std::pair<std::string, std::string>> keyed;  // name, flag
  bool has_output = false;
  for (const Item& item : split.items) {
    if (item.name.empty()) continue;  // the input
    const std::string value = absl::StrJoin(item.values, " ");
    if (item.name == "--help") {
      return absl::FailedPreconditionError(
          "--help asks for the compiler's help, not a compile");
    }
    if (item.name == "--output" && !item.values.empty()) {
      has_output = true;
      command.output = value;
      command.output_at = item.value_at;
    }
    if ((item.name == "--logfile" || item.name == "--workdir") &&
        !item.values.empty()) {
      command.written_paths.push_back(item.value_at);
    }
    if (item.name == "--pipeline" &&
        std::find(item.values.begin(), item.values.end(), "SaveTemps") !=
            item.values.end()) {
      return absl::FailedPreconditionError(
          "--pipeline ... SaveTemps keeps the compiler's intermediate files, "
          "which neffcc does not cache");
    }
    if (item.option != nullptr && item.option->keyed == Keyed::kNo) continue;
    if (item.name == "--target") command.target = value;
    if (item.name == "--enable-internal-neff-wrapper") {
      command.wants_wrapper = true;
    }
    command.keyed_values.insert(command.keyed_values.end(), item.values.begin(),
                                item.values.end());
    keyed.emplace_back(item.name, item.values.empty()
                                      ? item.name
                                      : absl::StrCat(item.name, "=", value));
  }
  if (!has_output) return absl::FailedPreconditionError("no --output");
  std::stable_sort(
      keyed.begin(), keyed.end(),
      [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [name, flag] : keyed) command.key_flags.push_back(std::move(flag));
  return command;
}

std::vector<std::string> RunnableArgs(absl::Span<const std::string> args,
                                      const CompileCommand& command,
                                      absl::string_view output,
                                      absl::string_view cwd) {
  std::vector<std::string> out(args.begin(), args.end());
  auto replace = [&](const ArgPath& at, absl::string_view value) {
    out[at.index] = absl::StrCat(out[at.index].substr(0, at.offset), value);
  };
  auto absolute = [&](const ArgPath& at) {
    const std::string value = out[at.index].substr(at.offset);
    if (!value.empty() && value[0] != '/') {
      replace(at, absl::StrCat(cwd, "/", value));
    }
  };
  replace(command.output_at, output);
  absolute(command.input_at);
  for (const ArgPath& at : command.written_paths) absolute(at);
  return out;
}

}  // namespace neffd::neffcc
