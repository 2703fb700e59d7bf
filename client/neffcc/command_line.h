// client/neffcc/command_line.h
//
// How neffcc reads its command line. Two questions, both pure:
//
// 1. Which compiler, with which arguments (ParseNeffccArgs). neffcc acts as
//    the compiler when argv[0]'s base name is "neuronx-cc" (masquerade: a
//    symlink named neuronx-cc, early on PATH, pointing at neffcc); otherwise
//    argv[1] names the compiler, as a bare name ("neffcc neuronx-cc ARGS...",
//    looked up like the masquerade) or a path ("neffcc /opt/bin/neuronx-cc
//    ARGS...", used as the real compiler).
//
// 2. Whether the arguments are a compile neffcc can cache, and what goes into
//    its key (ParseCompile). Only "compile" with exactly one input file is
//    cached. The key's flags are every argument except the subcommand, the
//    input path and the flags that only say where to write or how loud to be
//    (kUnkeyedFlags, each with its value, in the "--f=v" and "--f v" forms).
//    Flags keep their order; a flag known to take a value (kValueFlags) given
//    as "--f v" is keyed as "--f=v", so both spellings give one key. Unknown
//    flags are keyed too: "--unknown v" is read as a flag with a value when
//    another argument is clearly the input, and as a bare flag when "v" is
//    the only candidate for the input. A command line where the input cannot
//    be told apart is not cached (ccache's "unsupported option": the real
//    compiler runs unchanged).
//
// Thread-safe (pure functions).
#ifndef NEFFD_CLIENT_NEFFCC_COMMAND_LINE_H_
#define NEFFD_CLIENT_NEFFCC_COMMAND_LINE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace neffd::neffcc {

// The name neffcc answers to, and looks for on PATH.
inline constexpr char kCompilerName[] = "neuronx-cc";

// Not part of the key: they name where the compiler writes, or set how much
// it says.
inline constexpr absl::string_view kUnkeyedFlags[] = {"--output", "--logfile",
                                                      "--workdir", "--verbose"};

// neuronx-cc compile options that take a value (neuronx-cc compile --help).
inline constexpr absl::string_view kValueFlags[] = {
    "--output",
    "--logfile",
    "--workdir",
    "--verbose",
    "--target",
    "--framework",
    "--model-type",
    "--auto-cast",
    "--auto-cast-type",
    "--distribution-strategy",
    "--logical-nc-config",
    "--lnc",
    "--optlevel",
    "--pipeline",
    "--tensorizer-options",
    "--internal-hlo2tensorizer-options",
    "--internal-backend-options",
};

struct NeffccArgs {
  // Empty: find the real compiler (NEFFD_REAL_COMPILER, else PATH). Else the
  // path given explicitly ("neffcc /path/to/neuronx-cc ...").
  std::string explicit_compiler;
  // What the compiler is called with (after its own name).
  std::vector<std::string> compiler_args;
};

// InvalidArgument with a usage line when neffcc is called under another
// name without a compiler ("neffcc" alone, "neffcc gcc ...").
absl::StatusOr<NeffccArgs> ParseNeffccArgs(absl::Span<const std::string> argv);

struct CompileCommand {
  std::string input;   // as given (relative to the working directory)
  std::string output;  // --output's value
  std::string target;  // --target's value; empty if not given
  // The keyed flags, canonical: "--f=v" or a bare flag, in order.
  std::vector<std::string> key_flags;
};

// The compile `args` (compiler_args) ask for. FailedPrecondition naming the
// reason when they are not a compile neffcc caches (another subcommand, no
// --output, no or several inputs).
absl::StatusOr<CompileCommand> ParseCompile(absl::Span<const std::string> args);

// `args` with --output's value (either form) replaced by `output`.
std::vector<std::string> WithOutput(absl::Span<const std::string> args,
                                    absl::string_view output);

}  // namespace neffd::neffcc

#endif  // NEFFD_CLIENT_NEFFCC_COMMAND_LINE_H_
