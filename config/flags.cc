#include "config/flags.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "config/env.h"

namespace neffd::config {
namespace {

constexpr const char* kLevelNames[] = {"error", "warning", "info", "debug"};

// What a value of the flag's type looks like, for errors and help.
struct TypeWords {
  const char* placeholder;  // in "--name=PLACEHOLDER"; empty for bools
  const char* kind;         // in "is not KIND"
};

TypeWords WordsFor(const absl::CommandLineFlag& flag) {
  if (flag.IsOfType<bool>()) return {"", "true or false"};
  if (flag.IsOfType<DurationFlag>() ||
      flag.IsOfType<std::optional<DurationFlag>>()) {
    return {"DURATION", "a duration (seconds, or e.g. 30s, 5m, 1h, 7d)"};
  }
  if (flag.IsOfType<ByteSizeFlag>() ||
      flag.IsOfType<std::optional<ByteSizeFlag>>()) {
    return {"SIZE", "a size (bytes, or e.g. 512MiB, 4GiB)"};
  }
  if (flag.IsOfType<LogLevelFlag>() ||
      flag.IsOfType<std::optional<LogLevelFlag>>()) {
    return {"LEVEL", "a log level (0-3, error, warning, info or debug)"};
  }
  if (flag.IsOfType<uint64_t>() || flag.IsOfType<uint32_t>()) {
    return {"N", "a whole number >= 0"};
  }
  if (flag.IsOfType<int64_t>() || flag.IsOfType<int32_t>()) {
    return {"N", "a whole number"};
  }
  if (flag.IsOfType<double>()) return {"NUMBER", "a number"};
  return {"VALUE", "a valid value"};
}

// `text` in lines of at most kHelpWidth columns, each indented by `indent`.
std::string Wrapped(absl::string_view text, absl::string_view indent) {
  constexpr size_t kHelpWidth = 78;
  std::string out, line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() &&
        indent.size() + line.size() + 1 + word.size() > kHelpWidth) {
      absl::StrAppend(&out, indent, line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(&out, indent, line, "\n");
  return out;
}

}  // namespace

bool AbslParseFlag(absl::string_view text, DurationFlag* flag,
                   std::string* error) {
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds) && std::isfinite(seconds)) {
    flag->value = absl::Seconds(seconds);
    return true;
  }
  double days = 0;
  if (absl::EndsWith(text, "d") &&
      absl::SimpleAtod(text.substr(0, text.size() - 1), &days) &&
      std::isfinite(days) && std::abs(days) < 1e6) {
    flag->value = absl::Hours(24 * days);
    return true;
  }
  if (!text.empty() && absl::ParseDuration(text, &flag->value)) return true;
  *error = "is not a duration";
  return false;
}

std::string AbslUnparseFlag(const DurationFlag& flag) {
  return absl::FormatDuration(flag.value);
}

namespace {
constexpr absl::string_view kByteUnits = "KMGTP";  // 1024^1 .. 1024^5
}  // namespace

bool AbslParseFlag(absl::string_view text, ByteSizeFlag* flag,
                   std::string* error) {
  std::string t = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  if (absl::EndsWith(t, "IB")) {
    t.resize(t.size() - 2);  // "2GiB" -> "2G"
  } else if (t.size() > 1 && absl::EndsWith(t, "B")) {
    t.pop_back();  // "2GB" -> "2G", "512B" -> "512"
  }
  double scale = 1;
  if (!t.empty() && !absl::ascii_isdigit(t.back())) {
    const size_t unit = kByteUnits.find(t.back());
    if (unit == absl::string_view::npos) {
      *error = "is not a size";
      return false;
    }
    scale = static_cast<double>(uint64_t{1} << (10 * (unit + 1)));
    t.pop_back();
  }
  uint64_t whole = 0;
  double value = 0;
  if (scale == 1 && absl::SimpleAtoi(t, &whole)) {
    flag->bytes = whole;  // exact beyond 2^53, which a double is not
    return true;
  }
  if (t.empty() || !absl::SimpleAtod(t, &value) || !std::isfinite(value) ||
      value < 0 || value * scale >= 18446744073709551616.0) {
    *error = "is not a size";
    return false;
  }
  flag->bytes = static_cast<uint64_t>(value * scale);
  return true;
}

std::string AbslUnparseFlag(const ByteSizeFlag& flag) {
  for (size_t unit = kByteUnits.size(); unit > 0; --unit) {
    const uint64_t scale = uint64_t{1} << (10 * unit);
    if (flag.bytes != 0 && flag.bytes % scale == 0) {
      return absl::StrCat(flag.bytes / scale, kByteUnits.substr(unit - 1, 1),
                          "iB");
    }
  }
  return absl::StrCat(flag.bytes);
}

bool AbslParseFlag(absl::string_view text, LogLevelFlag* flag,
                   std::string* error) {
  const std::string lower = absl::AsciiStrToLower(text);
  for (int level = 0; level < 4; ++level) {
    if (lower == kLevelNames[level] || lower == absl::StrCat(level)) {
      flag->level = level;
      return true;
    }
  }
  *error = "is not a log level";
  return false;
}

std::string AbslUnparseFlag(const LogLevelFlag& flag) {
  return absl::StrCat(flag.level);
}

bool AsksForHelp(absl::Span<const std::string> args) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--") return false;
    if (args[i] == "--help" || args[i] == "-help" || args[i] == "-h" ||
        args[i] == "--helpfull") {
      return true;
    }
  }
  return false;
}

std::vector<std::string> CheckFlags(absl::Span<const std::string> args) {
  std::vector<std::string> errors;
  for (size_t i = 1; i < args.size(); ++i) {
    absl::string_view arg = args[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    absl::ConsumePrefix(&arg, "-");
    absl::ConsumePrefix(&arg, "-");
    const std::vector<absl::string_view> name_value =
        absl::StrSplit(arg, absl::MaxSplits('=', 1));
    const std::string name(name_value[0]);
    const bool has_value = name_value.size() == 2;
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr && !has_value && absl::StartsWith(name, "no")) {
      absl::CommandLineFlag* negated =
          absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr && negated->IsOfType<bool>()) continue;
    }
    if (flag == nullptr) {
      errors.push_back(absl::StrCat("--", name, ": no such flag"));
      continue;
    }
    if (flag->IsOfType<bool>() && !has_value) continue;
    if (!has_value && i + 1 >= args.size()) {
      errors.push_back(absl::StrCat("--", name, ": needs a value"));
      continue;
    }
    const std::string value =
        has_value ? std::string(name_value[1]) : args[++i];
    // ParseFrom would set the flag; parse a copy's worth by parsing into
    // the flag and restoring it, since the registry offers nothing else.
    const std::string before = flag->CurrentValue();
    std::string why;
    if (flag->ParseFrom(value, &why)) {
      std::string ignored;
      flag->ParseFrom(before, &ignored);
      continue;
    }
    errors.push_back(absl::StrCat("--", name, ": \"", value, "\" is not ",
                                  WordsFor(*flag).kind));
  }
  return errors;
}

std::string Placeholder(const absl::CommandLineFlag& flag) {
  return WordsFor(flag).placeholder;
}

std::vector<const absl::CommandLineFlag*> FlagsUnder(
    absl::string_view directory) {
  std::vector<const absl::CommandLineFlag*> flags;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (absl::StartsWith(flag->Filename(), directory)) flags.push_back(flag);
  }
  std::sort(flags.begin(), flags.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  return flags;
}

std::string FlagsHelp(
    absl::string_view directory,
    const std::function<std::string(absl::string_view flag)>& environment) {
  std::string help;
  for (const absl::CommandLineFlag* flag : FlagsUnder(directory)) {
    const TypeWords words = WordsFor(*flag);
    std::string fallback = flag->DefaultValue();
    const std::string variable = environment(flag->Name());
    if (const VarSpec* spec = FindVariable(variable); spec != nullptr) {
      fallback = spec->default_doc != nullptr     ? spec->default_doc
                 : spec->default_value != nullptr ? spec->default_value
                                                  : "unset";
    }
    const std::string shown_default =
        variable.empty() ? (fallback.empty() ? "none" : fallback)
                         : absl::StrCat("$", variable, ", else ", fallback);
    absl::StrAppend(
        &help, "  --", flag->Name(), *words.placeholder == '\0' ? "" : "=",
        words.placeholder, "\n",
        Wrapped(absl::StrCat(flag->Help(), " (default: ", shown_default, ")"),
                "      "));
  }
  return help;
}

}  // namespace neffd::config
