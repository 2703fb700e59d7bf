// client/staged_output.h
//
// A rank's compiled output handed to the daemon through its staging
// directory (docs/CLIENT.md, "The protocol"). The daemon reads the staged file
// once, hashing it as it copies it (or, when the file is its own user's,
// renaming it into its tier), and removes it.
//
// Contract:
//   - Stage() puts a file under a fresh name in the staging directory: the
//     output itself, renamed, when the caller lets the publish take it
//     (`may_move`), the output is a regular file with one name and the
//     staging directory is on its filesystem; else a kernel copy. A large
//     NEFF then costs no second pass and no second file to remove.
//   - Finish(published) removes the staged name (the daemon's, usually
//     gone already). A moved output that was not published is back at its
//     path afterwards with its bytes: renamed back if the staged file is
//     still there, else copied from the descriptor held since Stage (the
//     daemon removes what it refused). A copied output never left its path.
//   - A process killed while its output is staged leaves the output in the
//     staging directory (swept by pid, client/daemon_backend.cc) and none at
//     its path: the work directory's completion marker no longer matches, so
//     the next holder compiles again rather than adopt a missing file.
#ifndef NEFFD_CLIENT_STAGED_OUTPUT_H_
#define NEFFD_CLIENT_STAGED_OUTPUT_H_

#include <cstdint>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "store/unique_fd.h"

namespace neffd {

class StagedOutput {
 public:
  // Stages the `size` bytes at `path` as `staged_path` (see above). A file
  // of another size is DataLoss ("changed after it was compiled") and
  // stages nothing.
  static absl::StatusOr<StagedOutput> Stage(const std::string& path,
                                            uint64_t size,
                                            const std::string& staged_path,
                                            bool may_move);

  StagedOutput(StagedOutput&&) = default;
  StagedOutput& operator=(StagedOutput&&) = default;

  const std::string& staged_path() const { return staged_path_; }
  bool moved() const { return moved_; }

  // Call once, after the publish (see above).
  void Finish(bool published);

 private:
  StagedOutput(std::string path, std::string staged_path, UniqueFd output,
               bool moved)
      : path_(std::move(path)),
        staged_path_(std::move(staged_path)),
        output_(std::move(output)),
        moved_(moved) {}

  void PutBack();

  std::string path_;
  std::string staged_path_;
  UniqueFd output_;  // the output's inode, held to put a moved one back
  bool moved_;
};

}  // namespace neffd

#endif  // NEFFD_CLIENT_STAGED_OUTPUT_H_
