#include "config/version.h"

#include "absl/strings/str_cat.h"

namespace neffd::config {
namespace {

// Defines kVersion, from //:VERSION (the genrule in config/BUILD.bazel).
#include "config/version.inc"

}  // namespace

absl::string_view Version() { return kVersion; }

std::string VersionLine(absl::string_view program) {
  return absl::StrCat(program, " ", kVersion);
}

bool AsksForVersion(absl::Span<const std::string> args) {
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--") return false;
    if (args[i] == "--version" || args[i] == "-version") return true;
  }
  return false;
}

}  // namespace neffd::config
