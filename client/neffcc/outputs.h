// client/neffcc/outputs.h
//
// A compile's whole result as one cache artifact (issue 28). neuronx-cc
// writes the NEFF at --output and may write side outputs: into its working
// directory (wrapped_neff.hlo under --enable-internal-neff-wrapper) or beside
// --output. neffcc runs the compiler in a directory of its own
// (CompileJob::workdir + "/cwd") with --output in another ("/out"), so
// whatever it writes there is the call's result, untouched by concurrent
// callers.
//
// The artifact of an entry is the NEFF itself when there are no side outputs
// (so plain entries are byte for byte what they were, and libneuronxla's
// layout still holds a NEFF), else a bundle: the NEFF and each side output,
// one sha256-verified file, published and served atomically like any entry:
//
//   NEFFCC-BUNDLE 1\n
//   <size> output\n            the NEFF (always first)
//   <size> cwd <name>\n        a side output in the working directory
//   <size> beside <name>\n     a side output beside --output
//   \n
//   <the bytes, in that order>
//
// A NEFF never starts with the magic line. Side outputs are bounded
// (kMaxSideOutputs, kMaxSideOutputBytes) and must be regular files with
// plain names: anything else (a directory, a FIFO, too many or too large) is
// a result neffcc cannot capture, and the call is not cached. The compiler's
// own log (kCompilerLogs) is not a result: it goes to the compiling caller
// and is not cached (ccache keeps no compiler logs either).
//
// Thread-safe (no shared state).
#ifndef NEFFD_CLIENT_NEFFCC_OUTPUTS_H_
#define NEFFD_CLIENT_NEFFCC_OUTPUTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neffd::neffcc {

inline constexpr size_t kMaxSideOutputs = 16;
inline constexpr uint64_t kMaxSideOutputBytes = uint64_t{1} << 30;
inline constexpr absl::string_view kCompilerLogs[] = {"log-neuron-cc.txt"};

struct SideOutput {
  enum class Place { kCwd, kBeside };
  Place place = Place::kCwd;
  std::string name;
  std::string path;  // where it is now
  uint64_t size = 0;
};

// The side outputs in `cwd_dir` and in `out_dir` (but `output_name`, the
// NEFF). FailedPrecondition with a one-line reason when they cannot be
// captured.
absl::StatusOr<std::vector<SideOutput>> CollectSideOutputs(
    const std::string& cwd_dir, const std::string& out_dir,
    const std::string& output_name);

// Makes `artifact` from the NEFF at `neff` (renamed when `sides` is empty)
// and `sides` (a bundle).
absl::Status WriteArtifact(const std::string& neff,
                           const std::vector<SideOutput>& sides,
                           const std::string& artifact);

// Recreates a cached artifact where the compiler would have written it: the
// NEFF at `output`, each side output in `cwd` or beside `output`. Each file
// is a new file of its own (a reflink where the filesystem can, else a
// copy), written beside its target and renamed in, never a link into the
// cache.
absl::Status PlaceResult(const std::string& artifact, const std::string& output,
                         const std::string& cwd);

// A path's directory ("." for a bare name) and its last component.
std::string DirName(const std::string& path);
std::string BaseName(const std::string& path);

// Copies the file `source` to `target` the same way.
absl::Status PlaceFile(const std::string& source, const std::string& target);

}  // namespace neffd::neffcc

#endif  // NEFFD_CLIENT_NEFFCC_OUTPUTS_H_
