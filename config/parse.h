// config/parse.h (internal to //config)
//
// The parsers behind the registry's Rules, and the few helpers that turn
// host facts into values. Each parser takes the raw text of one environment
// variable and returns the typed value, or InvalidArgument whose message says
// what was expected (it becomes the second half of a snapshot warning).
// Pure functions; thread-safe.

#ifndef NEFFD_CONFIG_PARSE_H_
#define NEFFD_CONFIG_PARSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neffd::config::internal {

// 1/0, true/false, yes/no, on/off, in any case; nothing else.
absl::StatusOr<bool> ParseBool(absl::string_view text);

// Plain decimal digits (no sign, no spaces) in [min, max]; "007" is 7.
absl::StatusOr<int64_t> ParseDecimal(absl::string_view text, int64_t min,
                                     int64_t max);

// "from 0 to 3", ">= 1": how docs and messages state [min, max].
std::string RangeText(int64_t min, int64_t max);

// Comma-separated integers in [min, max]; with `allow_ranges` also A-B
// (A <= B), expanded. Items may have surrounding spaces. The result is
// sorted and without duplicates. "" is the empty list.
absl::StatusOr<std::vector<int64_t>> ParseIntList(absl::string_view text,
                                                  int64_t min, int64_t max,
                                                  bool allow_ranges);

// Comma-separated names, in order and without duplicates. With `choices`
// (comma-separated) each name must be one of them, else each must be made of
// [A-Za-z0-9_.-]. "" is the empty list.
absl::StatusOr<std::vector<std::string>> ParseNameList(
    absl::string_view text, absl::string_view choices);

// A platform name: lowercase letters, digits, optional lowercase suffix
// ("trn2", "trn3", "inf2").
absl::Status CheckPlatform(absl::string_view text);

// "unix:/absolute/path" or "HOST:PORT" with PORT in 1..65535 (HOST may be a
// bracketed IPv6 address).
absl::Status CheckAddress(absl::string_view text);

// (major, minor) of a PyTorch version such as "2.13", "2.13.0+cpu",
// "2.13.0a0+git1234".
absl::StatusOr<std::pair<int, int>> ParseTorchVersion(absl::string_view text);

// "trn2" for an instance type such as "trn2.48xlarge" or "trn2u.48xlarge";
// nullopt for anything that is not a Trainium instance.
std::optional<std::string> PlatformFromInstanceType(
    absl::string_view product_name);

// Levenshtein distance between `a` and `b`.
int EditDistance(absl::string_view a, absl::string_view b);

}  // namespace neffd::config::internal

#endif  // NEFFD_CONFIG_PARSE_H_
