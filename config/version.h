// config/version.h
//
// The version every binary reports with --version. It is written in one
// place, the VERSION file at the repo root (a release tarball has no .git to
// ask), which a genrule turns into a constant; deploy/package.sh names the
// release after the same file.
//
// Thread-safety: pure functions.
#ifndef NEFFD_CONFIG_VERSION_H_
#define NEFFD_CONFIG_VERSION_H_

#include <string>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace neffd::config {

// The version, e.g. "0.1.0".
absl::string_view Version();

// "PROGRAM VERSION": the line --version prints.
std::string VersionLine(absl::string_view program);

// True if `args` (argv, program name first) ask for the version: --version
// or -version before any "--".
bool AsksForVersion(absl::Span<const std::string> args);

}  // namespace neffd::config

#endif  // NEFFD_CONFIG_VERSION_H_
