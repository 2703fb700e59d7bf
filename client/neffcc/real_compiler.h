// client/neffcc/real_compiler.h
//
// The real neuronx-cc behind neffcc: finding it, asking its version, and
// running it.
//
// FindRealCompiler never returns neffcc itself: a candidate whose resolved
// path (realpath, all symlinks followed) is neffcc's own executable
// (/proc/self/exe) is skipped, however many links lead to it, so a
// masquerade directory can never make neffcc run itself. NotFound, with a
// one-line reason, when there is no other compiler.
//
// CompilerVersion asks `{compiler} --version` and takes the first token of
// its output that starts with a digit and contains a dot ("NeuronX Compiler
// version 2.19.8089.0+8ab9f450" gives "2.19.8089.0+8ab9f450"). The answer is
// cached in {cache_dir}/{sha256 of the resolved path}, valid while the
// resolved file keeps its size and mtime, so a warm call costs one stat and a
// small read instead of a Python interpreter start. The cache lives in the
// node-local cache directory (TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR) rather than
// $XDG_CACHE_HOME: it is per host like the compiler installation it
// describes, shared by every user and job of the host, and home directories
// are often network mounts. A cache that cannot be written is not an error.
//
// RunCompiler runs a compiler in the caller's working directory and
// environment, with stdout and stderr passed through live (each to the same
// stream of this process) or captured only, and keeps the last
// kMaxCapturedBytes of both streams, interleaved, for the failure record.
//
// Thread-safe.
#ifndef NEFFD_CLIENT_NEFFCC_REAL_COMPILER_H_
#define NEFFD_CLIENT_NEFFCC_REAL_COMPILER_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neffd::neffcc {

inline constexpr size_t kMaxCapturedBytes = 256 << 10;

// realpath(/proc/self/exe).
std::string SelfExecutable();

// `configured` (NEFFD_REAL_COMPILER, or a path given explicitly) if
// non-empty and not `self`, else the first file named
// `name` in the directories of `path_env` (PATH) that is executable and does
// not resolve to `self`. Returns the path as found (not resolved).
absl::StatusOr<std::string> FindRealCompiler(absl::string_view configured,
                                             absl::string_view name,
                                             absl::string_view path_env,
                                             absl::string_view self);

// The version token of `--version` output; NotFound if there is none.
absl::StatusOr<std::string> ParseCompilerVersion(absl::string_view output);

// The compiler's version, from the cache in `cache_dir` or by asking it.
absl::StatusOr<std::string> CompilerVersion(const std::string& compiler,
                                            const std::string& cache_dir);

struct CompilerRun {
  int wait_status = 0;  // as from waitpid()
  std::string output;   // the tail of stdout and stderr
};

// Runs `argv` (argv[0] the compiler's path) to completion, in `cwd` (empty:
// this process's working directory).
absl::StatusOr<CompilerRun> RunCompiler(const std::vector<std::string>& argv,
                                        bool pass_through,
                                        const std::string& cwd = "");

// Replaces this process with `argv` (argv[0] the compiler's path); returns
// only on failure.
absl::Status ExecCompiler(const std::vector<std::string>& argv);

}  // namespace neffd::neffcc

#endif  // NEFFD_CLIENT_NEFFCC_REAL_COMPILER_H_
