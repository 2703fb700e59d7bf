#include "daemon/runtime/local_dir.h"

#include <errno.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/server/listeners.h"
#include "store/file_util.h"

namespace neffd {
absl::Status CheckLocalDirFilesystem(const std::string& path) {
  absl::Status s = CheckLocalFilesystem(path);
  if (!absl::IsFailedPrecondition(s)) return s;
  return absl::FailedPreconditionError(
      absl::StrCat("local dir ", s.message(),
                   "; TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR must be a local "
                   "filesystem"));
}

absl::Status PrepareLocalDir(const LocalDir& dir,
                             const std::string& socket_group) {
  if (absl::Status s = MakeGroupDirs(dir.root, kLocalDirMode); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckLocalDirFilesystem(dir.root); !s.ok()) {
    return s;
  }
  // The ranks' group may create lock files and stage outputs, and read the
  // tier and the wake notices; other users get nothing (docs/SECURITY.md).
  const std::pair<std::string, int> dirs[] = {{dir.locks(), kLocalDirMode},
                                              {dir.staging(), kStagingDirMode},
                                              {dir.tier(), kTierDirMode},
                                              {dir.wake(), kTierDirMode}};
  for (const auto& [path, mode] : dirs) {
    if (absl::Status s = MakeGroupDirs(path, mode); !s.ok()) return s;
    if (absl::Status s =
            RestrictToGroup(path, mode, socket_group,
                            /*group_required=*/false, "--socket_group");
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

}  // namespace neffd
