#include "config/parse.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace neffd::config::internal {
namespace {

bool AllDigits(absl::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return absl::ascii_isdigit(static_cast<unsigned char>(c));
  });
}

// Splits a comma-separated list into items stripped of spaces. "" (or only
// spaces) is no items; an empty item is an error.
absl::StatusOr<std::vector<absl::string_view>> SplitItems(
    absl::string_view text) {
  std::vector<absl::string_view> items;
  if (absl::StripAsciiWhitespace(text).empty()) return items;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    item = absl::StripAsciiWhitespace(item);
    if (item.empty()) {
      return absl::InvalidArgumentError("empty item in the list");
    }
    items.push_back(item);
  }
  return items;
}

}  // namespace

absl::StatusOr<bool> ParseBool(absl::string_view text) {
  static constexpr absl::string_view kTrue[] = {"1", "true", "yes", "on"};
  static constexpr absl::string_view kFalse[] = {"0", "false", "no", "off"};
  for (absl::string_view t : kTrue) {
    if (absl::EqualsIgnoreCase(text, t)) return true;
  }
  for (absl::string_view f : kFalse) {
    if (absl::EqualsIgnoreCase(text, f)) return false;
  }
  return absl::InvalidArgumentError(
      "expected 1/0, true/false, yes/no or on/off");
}

std::string RangeText(int64_t min, int64_t max) {
  if (max == std::numeric_limits<int64_t>::max())
    return absl::StrCat(">= ", min);
  return absl::StrCat("from ", min, " to ", max);
}

absl::StatusOr<int64_t> ParseDecimal(absl::string_view text, int64_t min,
                                     int64_t max) {
  int64_t value = 0;
  if (!AllDigits(text) || !absl::SimpleAtoi(text, &value) || value < min ||
      value > max) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected a plain decimal integer ", RangeText(min, max)));
  }
  return value;
}

absl::StatusOr<std::vector<int64_t>> ParseIntList(absl::string_view text,
                                                  int64_t min, int64_t max,
                                                  bool allow_ranges) {
  absl::StatusOr<std::vector<absl::string_view>> items = SplitItems(text);
  if (!items.ok()) return items.status();
  const std::string expected =
      allow_ranges
          ? absl::StrCat("expected indices or ranges A-B (A <= B) ",
                         RangeText(min, max), ", e.g. 0,1,2-5")
          : absl::StrCat("expected comma-separated plain decimal integers ",
                         RangeText(min, max));
  std::vector<int64_t> values;
  for (absl::string_view item : *items) {
    size_t dash = item.find('-');
    if (allow_ranges && dash != absl::string_view::npos && dash > 0) {
      absl::StatusOr<int64_t> lo = ParseDecimal(item.substr(0, dash), min, max);
      absl::StatusOr<int64_t> hi =
          ParseDecimal(item.substr(dash + 1), min, max);
      if (!lo.ok() || !hi.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("bad range \"", item, "\"; ", expected));
      }
      if (*lo > *hi) {
        return absl::InvalidArgumentError(
            absl::StrCat("range \"", item, "\" is reversed; ", expected));
      }
      for (int64_t i = *lo; i <= *hi; ++i) values.push_back(i);
      continue;
    }
    absl::StatusOr<int64_t> value = ParseDecimal(item, min, max);
    if (!value.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad item \"", item, "\"; ", expected));
    }
    values.push_back(*value);
  }
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  return values;
}

absl::StatusOr<std::vector<std::string>> ParseNameList(
    absl::string_view text, absl::string_view choices) {
  absl::StatusOr<std::vector<absl::string_view>> items = SplitItems(text);
  if (!items.ok()) return items.status();
  const std::vector<absl::string_view> allowed =
      absl::StrSplit(choices, ',', absl::SkipEmpty());
  std::vector<std::string> names;
  for (absl::string_view item : *items) {
    if (!allowed.empty() &&
        std::find(allowed.begin(), allowed.end(), item) == allowed.end()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "unknown name \"", item, "\"; expected a subset of ", choices));
    }
    bool name_chars = std::all_of(item.begin(), item.end(), [](char c) {
      return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' ||
             c == '.' || c == '-';
    });
    if (!name_chars) {
      return absl::InvalidArgumentError(absl::StrCat(
          "\"", item, "\" is not a name; expected letters, digits, _ . -"));
    }
    if (std::find(names.begin(), names.end(), item) == names.end()) {
      names.emplace_back(item);
    }
  }
  return names;
}

absl::Status CheckPlatform(absl::string_view text) {
  size_t i = 0;
  auto skip = [&](auto pred) {
    size_t start = i;
    while (i < text.size() && pred(static_cast<unsigned char>(text[i]))) ++i;
    return i > start;
  };
  bool ok = skip(absl::ascii_islower) && skip(absl::ascii_isdigit);
  skip(absl::ascii_islower);
  if (!ok || i != text.size()) {
    return absl::InvalidArgumentError(
        "expected a platform name such as trn2 or trn3");
  }
  return absl::OkStatus();
}

absl::Status CheckAddress(absl::string_view text) {
  const absl::Status bad = absl::InvalidArgumentError(
      "expected unix:/absolute/path or HOST:PORT (e.g. 127.0.0.1:7878)");
  if (absl::ConsumePrefix(&text, "unix:")) {
    return text.size() > 1 && text[0] == '/' ? absl::OkStatus() : bad;
  }
  size_t colon = text.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return bad;
  absl::string_view host = text.substr(0, colon);
  bool bracketed = absl::StartsWith(host, "[") && absl::EndsWith(host, "]");
  bool plain = std::all_of(host.begin(), host.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '.' ||
           c == '-';
  });
  if (!bracketed && !plain) return bad;
  return ParseDecimal(text.substr(colon + 1), 1, 65535).ok() ? absl::OkStatus()
                                                             : bad;
}

absl::StatusOr<std::pair<int, int>> ParseTorchVersion(absl::string_view text) {
  const absl::Status bad = absl::InvalidArgumentError(absl::StrCat(
      "PyTorch version \"", text, "\" is not like 2.13 or 2.13.0+cpu"));
  std::vector<absl::string_view> parts = absl::StrSplit(text, '.');
  if (parts.size() < 2) return bad;
  // The minor part may carry a local or pre-release suffix: "13+cpu", "13a0".
  absl::string_view minor = parts[1];
  size_t digits = 0;
  while (digits < minor.size() &&
         absl::ascii_isdigit(static_cast<unsigned char>(minor[digits]))) {
    ++digits;
  }
  absl::StatusOr<int64_t> major_value = ParseDecimal(parts[0], 0, 1000000);
  absl::StatusOr<int64_t> minor_value =
      ParseDecimal(minor.substr(0, digits), 0, 1000000);
  if (!major_value.ok() || !minor_value.ok()) return bad;
  return std::make_pair(static_cast<int>(*major_value),
                        static_cast<int>(*minor_value));
}

std::optional<std::string> PlatformFromInstanceType(
    absl::string_view product_name) {
  absl::string_view family = absl::StripAsciiWhitespace(product_name);
  family = family.substr(0, family.find('.'));
  if (!absl::ConsumePrefix(&family, "trn")) return std::nullopt;
  size_t digits = 0;
  while (digits < family.size() &&
         absl::ascii_isdigit(static_cast<unsigned char>(family[digits]))) {
    ++digits;
  }
  // "trn2u" (UltraServer) targets trn2.
  bool suffix_ok =
      std::all_of(family.begin() + digits, family.end(), [](char c) {
        return absl::ascii_islower(static_cast<unsigned char>(c));
      });
  if (digits == 0 || !suffix_ok) return std::nullopt;
  return absl::StrCat("trn", family.substr(0, digits));
}

int EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<int> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = static_cast<int>(j);
  for (size_t i = 1; i <= a.size(); ++i) {
    int diagonal = row[0];
    row[0] = static_cast<int>(i);
    for (size_t j = 1; j <= b.size(); ++j) {
      int above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1,
                         diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace neffd::config::internal
