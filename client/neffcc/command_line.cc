#include "client/neffcc/command_line.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace neffd::neffcc {
namespace {

constexpr char kUsage[] =
    "usage: neffcc neuronx-cc ARGS... | neffcc /path/to/neuronx-cc ARGS... "
    "(or a symlink named neuronx-cc to neffcc)";

template <size_t N>
bool Contains(const absl::string_view (&names)[N], absl::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

absl::string_view BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

// One argument of a compile, or a flag with the argument that is its value.
struct Item {
  std::string flag;  // empty for a positional argument
  std::string value;
  bool has_value = false;
  // "--unknown v": v may be the flag's value or the input.
  bool value_may_be_input = false;
};

bool IsFlag(absl::string_view arg) { return arg.size() > 1 && arg[0] == '-'; }

std::vector<Item> SplitItems(absl::Span<const std::string> args) {
  std::vector<Item> items;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    Item item;
    if (!IsFlag(arg)) {
      item.value = std::string(arg);
    } else if (const size_t eq = arg.find('=');
               absl::StartsWith(arg, "--") && eq != absl::string_view::npos) {
      item.flag = std::string(arg.substr(0, eq));
      item.value = std::string(arg.substr(eq + 1));
      item.has_value = true;
    } else {
      item.flag = std::string(arg);
      const bool next_is_value = i + 1 < args.size() && !IsFlag(args[i + 1]);
      if (absl::StartsWith(arg, "--") && next_is_value) {
        item.value = args[++i];
        item.has_value = true;
        item.value_may_be_input = !Contains(kValueFlags, item.flag);
      }
    }
    items.push_back(std::move(item));
  }
  return items;
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

absl::StatusOr<CompileCommand> ParseCompile(
    absl::Span<const std::string> args) {
  if (args.empty() || args[0] != "compile") {
    return absl::FailedPreconditionError("not a compile");
  }
  std::vector<Item> items = SplitItems(args.subspan(1));
  std::vector<Item*> positionals, maybe_inputs;
  for (Item& item : items) {
    if (item.flag.empty()) positionals.push_back(&item);
    if (item.value_may_be_input) maybe_inputs.push_back(&item);
  }
  CompileCommand command;
  if (positionals.size() == 1) {
    command.input = positionals[0]->value;
  } else if (positionals.empty() && maybe_inputs.size() == 1) {
    // "--unknown INPUT": the flag is a bare one.
    command.input = std::move(maybe_inputs[0]->value);
    maybe_inputs[0]->has_value = false;
  } else {
    return absl::FailedPreconditionError(
        positionals.empty() && maybe_inputs.empty()
            ? "no input file"
            : "cannot tell which argument is the input file");
  }
  for (const Item& item : items) {
    if (item.flag.empty()) continue;  // the input
    if (item.flag == "--output") command.output = item.value;
    if (item.flag == "--target") command.target = item.value;
    if (Contains(kUnkeyedFlags, item.flag)) continue;
    command.key_flags.push_back(
        item.has_value ? absl::StrCat(item.flag, "=", item.value) : item.flag);
  }
  if (command.output.empty()) {
    return absl::FailedPreconditionError("no --output");
  }
  return command;
}

std::vector<std::string> WithOutput(absl::Span<const std::string> args,
                                    absl::string_view output) {
  std::vector<std::string> out(args.begin(), args.end());
  for (size_t i = 0; i < out.size(); ++i) {
    if (absl::StartsWith(out[i], "--output=")) {
      out[i] = absl::StrCat("--output=", output);
    } else if (out[i] == "--output" && i + 1 < out.size()) {
      out[++i] = std::string(output);
    }
  }
  return out;
}

}  // namespace neffd::neffcc
