// neuronx-env: prints the effective configuration of this environment as
// neffd, its client, the allocator and torch-neuronx will read it.
//
//   neuronx-env                     aligned table; warnings on stderr
//   neuronx-env --json              typed values and origins as JSON
//   neuronx-env --check             exit 1 when there is any warning
//   neuronx-env --explain NAME      the spec's description and the value
//   neuronx-env --markdown          docs/CONFIG.md
//   --torch_version X.Y             PyTorch version for derived defaults
//
// Exit status: 0 fine, 1 warnings with --check, 2 bad usage.

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "config/env.h"
#include "config/parse.h"
#include "config/render.h"

ABSL_FLAG(bool, json, false, "print the configuration as JSON");
ABSL_FLAG(bool, check, false,
          "print only the warnings; exit 1 if there are any");
ABSL_FLAG(std::string, explain, "",
          "print the description and current value of one variable");
ABSL_FLAG(bool, markdown, false,
          "print docs/CONFIG.md (the reference generated from the registry)");
ABSL_FLAG(std::string, torch_version, "",
          "PyTorch version X.Y[.Z] of the job, for version-dependent defaults");
ABSL_FLAG(std::string, product_name_file, "/sys/class/dmi/id/product_name",
          "file naming the EC2 instance type, for the platform default");

namespace neffd::config {
namespace {

constexpr int kUsageError = 2;

int Fail(const std::string& message) {
  std::fprintf(stderr, "neuronx-env: %s\n", message.c_str());
  return kUsageError;
}

void Print(const std::string& text) { std::fputs(text.c_str(), stdout); }

int Run(const std::vector<char*>& args) {
  if (args.size() > 1) {
    return Fail(
        absl::StrCat("unexpected argument \"", args[1], "\"; see --help"));
  }
  const bool json = absl::GetFlag(FLAGS_json);
  const bool markdown = absl::GetFlag(FLAGS_markdown);
  const std::string explain = absl::GetFlag(FLAGS_explain);
  if (json + markdown + !explain.empty() > 1) {
    return Fail("use at most one of --json, --markdown and --explain");
  }
  if (markdown) {
    Print(RenderMarkdown());
    return 0;
  }

  SnapshotOptions options;
  options.torch_version = absl::GetFlag(FLAGS_torch_version);
  options.product_name_path = absl::GetFlag(FLAGS_product_name_file);
  if (!options.torch_version.empty()) {
    absl::StatusOr<std::pair<int, int>> version =
        internal::ParseTorchVersion(options.torch_version);
    if (!version.ok()) {
      return Fail(
          absl::StrCat("--torch_version: ", version.status().message()));
    }
  }
  const EnvSnapshot snapshot = EnvSnapshot::FromProcessEnvironment(options);

  if (!explain.empty()) {
    const VarSpec* spec = FindVariable(explain);
    if (spec == nullptr) {
      const VarSpec* suggestion = SuggestVariable(explain);
      return Fail(absl::StrCat(
          "unknown variable ", explain,
          suggestion ? absl::StrCat("; did you mean ", suggestion->name, "?")
                     : "; --markdown lists them all"));
    }
    Print(RenderExplain(snapshot, *spec));
  } else if (json) {
    absl::StatusOr<std::string> text = RenderJson(snapshot);
    if (!text.ok()) return Fail(std::string(text.status().message()));
    Print(*text);
  } else if (!absl::GetFlag(FLAGS_check)) {
    Print(RenderTable(snapshot));
  }
  for (const std::string& warning : snapshot.warnings()) {
    std::fprintf(stderr, "warning: %s\n", warning.c_str());
  }
  return absl::GetFlag(FLAGS_check) && !snapshot.warnings().empty() ? 1 : 0;
}

}  // namespace
}  // namespace neffd::config

int main(int argc, char** argv) {
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "config/neuronx_env_main");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::SetProgramUsageMessage(
      "Shows the effective neffd / torch-neuronx configuration of this "
      "environment.\n  neuronx-env [--json | --explain NAME | --markdown] "
      "[--check] [--torch_version X.Y]");
  return neffd::config::Run(absl::ParseCommandLine(argc, argv));
}
