#include "daemon/service/local_dir.h"

#include <errno.h>
#include <sys/vfs.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/service/listeners.h"
#include "store/file_util.h"

namespace neffd {
namespace {

constexpr long kNfsSuperMagic = 0x6969;
constexpr long kLustreSuperMagic = 0x0BD00BD0;
constexpr long kSmbSuperMagic = 0x517B;
constexpr long kCifsMagic = 0xFF534D42;

}  // namespace

absl::Status CheckLocalFilesystem(const std::string& path) {
  struct statfs fs;
  if (statfs(path.c_str(), &fs) != 0) {
    return absl::ErrnoToStatus(errno, absl::StrCat("statfs ", path));
  }
  const char* kind = nullptr;
  switch (static_cast<long>(fs.f_type)) {
    case kNfsSuperMagic:
      kind = "nfs";
      break;
    case kLustreSuperMagic:
      kind = "lustre";
      break;
    case kSmbSuperMagic:
    case kCifsMagic:
      kind = "smb";
      break;
  }
  if (kind == nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat("local dir ", path, " is on ", kind,
                   "; TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR must be a local "
                   "filesystem"));
}

absl::Status PrepareLocalDir(const LocalDir& dir,
                             const std::string& socket_group) {
  if (absl::Status s = MakeGroupDirs(dir.root, kLocalDirMode); !s.ok()) {
    return s;
  }
  if (absl::Status s = CheckLocalFilesystem(dir.root); !s.ok()) return s;
  // The ranks' group may create lock files and stage outputs, and read the
  // tier; other users get nothing (docs/SECURITY.md).
  const std::pair<std::string, int> dirs[] = {{dir.locks(), kLocalDirMode},
                                              {dir.staging(), kStagingDirMode},
                                              {dir.tier(), kTierDirMode}};
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
