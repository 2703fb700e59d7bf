// neffcc: a neuronx-cc that asks neffd first (docs/CLIENT.md, "neffcc").
// Installed as a symlink named neuronx-cc in a directory early on PATH, or
// run as `neffcc neuronx-cc ARGS...`. Cacheable compiles go through
// compile_flow.h; everything else, and everything under NEFFD_DISABLE=1 or
// TORCH_NEURONX_NEFF_DISABLE_CACHE=1, is the real compiler itself (exec). Exit
// codes: the compiler's; 127 when there is no real compiler; 75 for a miss
// under NEFFD_NO_COMPILE=1; 2 for a neffcc command line that names no compiler;
// 1 when neffcc could not write a result it had. `neffcc --neffcc-version`
// prints neffcc's own version (`--version` is the real compiler's).
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/cache_client.h"
#include "client/neffcc/command_line.h"
#include "client/neffcc/compile_flow.h"
#include "client/neffcc/real_compiler.h"
#include "config/env.h"
#include "config/version.h"

namespace neffd::neffcc {
namespace {

constexpr int kExitUsage = 2;
constexpr int kExitNoCompiler = 127;

void Warn(const std::string& message) {
  std::fprintf(stderr, "neffcc: warning: %s\n", message.c_str());
}

int Exec(const std::vector<std::string>& argv) {
  absl::Status s = ExecCompiler(argv);
  std::fprintf(stderr, "neffcc: %s\n", std::string(s.message()).c_str());
  return kExitNoCompiler;
}

// neffcc's own version. Not --version: `neuronx-cc --version` is the real
// compiler's, and the compile cache keys on its answer.
constexpr char kVersionFlag[] = "--neffcc-version";

int Main(const std::vector<std::string>& argv) {
  if (argv.size() == 2 && argv[1] == kVersionFlag) {
    std::puts(config::VersionLine("neffcc").c_str());
    return 0;
  }
  absl::StatusOr<NeffccArgs> args = ParseNeffccArgs(argv);
  if (!args.ok()) {
    std::fprintf(stderr, "neffcc: %s\n",
                 std::string(args.status().message()).c_str());
    return kExitUsage;
  }
  const config::EnvSnapshot env = config::EnvSnapshot::FromProcessEnvironment();
  for (const std::string& warning : env.warnings()) Warn(warning);
  const char* path_env = std::getenv("PATH");
  absl::StatusOr<std::string> compiler = FindRealCompiler(
      args->explicit_compiler.empty() ? env.GetString("NEFFD_REAL_COMPILER")
                                      : args->explicit_compiler,
      kCompilerName, path_env == nullptr ? "" : path_env, SelfExecutable());
  if (!compiler.ok()) {
    std::fprintf(stderr, "neffcc: %s\n",
                 std::string(compiler.status().message()).c_str());
    return kExitNoCompiler;
  }
  std::vector<std::string> real_argv = {*compiler};
  real_argv.insert(real_argv.end(), args->compiler_args.begin(),
                   args->compiler_args.end());
  // The spec's switch (TORCH_NEURONX_NEFF_DISABLE_CACHE) and neffd's own:
  // the compiler runs untouched, as if neffcc were not on PATH.
  if (env.GetBool("NEFFD_DISABLE") ||
      env.GetBool("TORCH_NEURONX_NEFF_DISABLE_CACHE")) {
    return Exec(real_argv);
  }

  absl::StatusOr<CompileCommand> command = ParseCompile(args->compiler_args);
  if (!command.ok()) {
    // One line for a compile it cannot cache; other subcommands (--version,
    // list-operators) have nothing to cache and pass silently.
    if (!IsNotACompile(command.status())) {
      Warn(absl::StrCat(command.status().message(),
                        "; running the compiler without the cache"));
    }
    return Exec(real_argv);
  }
  CacheClientOptions client_options = CacheClientOptions::FromEnv(env);
  client_options.warn = Warn;
  absl::StatusOr<std::string> version = CompilerVersion(
      *compiler, absl::StrCat(client_options.local_dir, "/neffcc/versions"));
  if (!version.ok()) {
    Warn(absl::StrCat(version.status().message(),
                      "; running the compiler without the cache"));
    return Exec(real_argv);
  }
  CompileFlowOptions flow;
  flow.compiler = *compiler;
  flow.compiler_version = *std::move(version);
  flow.compiler_args = args->compiler_args;
  flow.command = *std::move(command);
  flow.invocation = argv;
  flow.no_compile = env.GetBool("NEFFD_NO_COMPILE");
  flow.explain = env.GetBool("NEFFD_EXPLAIN");
  // Not destroyed: see below.
  auto* client = new CacheClient(std::move(client_options));
  absl::StatusOr<int> exit_code = RunCachedCompile(*client, flow);
  if (exit_code.ok()) {
    // gRPC's teardown at exit joins its threads, which took 80 ms on a busy
    // host: more than the whole hit. Nothing else is left to finish but the
    // metrics and stdio.
    if (absl::Status s = client->WriteMetrics(); !s.ok()) {
      Warn(absl::StrCat("writing metrics: ", s.message()));
    }
    std::fflush(nullptr);
    _exit(*exit_code);
  }
  Warn(absl::StrCat(exit_code.status().message(),
                    "; running the compiler without the cache"));
  return Exec(real_argv);
}

}  // namespace
}  // namespace neffd::neffcc

int main(int argc, char** argv) {
  return neffd::neffcc::Main(std::vector<std::string>(argv, argv + argc));
}
