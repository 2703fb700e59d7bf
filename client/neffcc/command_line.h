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
//    its key (ParseCompile). The arguments are read the way neuronx-cc's own
//    parser (Python argparse) reads them:
//      - options may come before the subcommand ("--target=trn1 compile
//        --framework XLA IN --output OUT", libneuronxla's form) or after it;
//      - "--opt value" and "--opt=value" are one option; a known option takes
//        the number of values its table entry says (kOptions): none, one, or
//        every following argument up to the next option ("--pipeline compile
//        SaveTemps");
//      - "-O N", "-ON", "--optlevel N" and "--optlevel=N" are one setting, as
//        are "--lnc N" and "--logical-nc-config N";
//      - an unknown "--opt v" reads v as the option's value when another
//        argument is clearly the input, and as the input when v is the only
//        candidate.
//    The key's flags are every option in canonical form ("--name=value" or
//    "--name"), sorted by name (options with one name keep their order), so
//    the order of distinct options never matters, as it does not to the
//    compiler. Options that only say where to write or how loud to be
//    (Keyed::kNo: --output, --logfile, --workdir, --verbose) are left out.
//    Only "compile" with exactly one input and an --output is cached; a
//    compile that is not gets FailedPrecondition with the one-line reason
//    neffcc prints before it runs the real compiler unchanged (ccache's
//    "unsupported option").
//
// Thread-safe (pure functions).
#ifndef NEFFD_CLIENT_NEFFCC_COMMAND_LINE_H_
#define NEFFD_CLIENT_NEFFCC_COMMAND_LINE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace neffd::neffcc {

// The name neffcc answers to, and looks for on PATH.
inline constexpr char kCompilerName[] = "neuronx-cc";

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

// Where in the arguments a path is: args[index].substr(offset).
struct ArgPath {
  size_t index = 0;
  size_t offset = 0;
};

struct CompileCommand {
  std::string input;   // as given (relative to the working directory)
  std::string output;  // --output's value
  std::string target;  // --target's value; empty if not given
  // The keyed flags, canonical and sorted (see the file comment).
  std::vector<std::string> key_flags;
  // The values of keyed options, as given: a value that names a file makes
  // the key miss that file's bytes (the flow refuses such a call).
  std::vector<std::string> keyed_values;
  bool wants_wrapper = false;  // --enable-internal-neff-wrapper
  ArgPath input_at;
  ArgPath output_at;
  // --logfile's and --workdir's values: paths the compiler writes to.
  std::vector<ArgPath> written_paths;
};

// The compile `args` (compiler_args) ask for. FailedPrecondition naming the
// reason when they are not a compile neffcc caches: "not a compile" for
// another subcommand or none (the caller says nothing then), else a reason
// for the user (no --output, no or several inputs, --help, SaveTemps).
absl::StatusOr<CompileCommand> ParseCompile(absl::Span<const std::string> args);

// True for ParseCompile's "not a compile" (nothing to report).
bool IsNotACompile(const absl::Status& status);

// `args` as the compiler is run by neffcc: --output's value replaced by
// `output`, and the input's and the written paths' values made absolute
// against `cwd` when relative (the compiler runs in a directory of its own).
std::vector<std::string> RunnableArgs(absl::Span<const std::string> args,
                                      const CompileCommand& command,
                                      absl::string_view output,
                                      absl::string_view cwd);

}  // namespace neffd::neffcc

#endif  // NEFFD_CLIENT_NEFFCC_COMMAND_LINE_H_
