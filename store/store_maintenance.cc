// Store's maintenance half: listing, inspecting and removing entries.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "store/file_util.h"
#include "store/store.h"

namespace neffd {
namespace {

// Names in `dir` (not "." or ".."); empty if it cannot be read.
std::vector<std::string> ListDir(const std::string &dir) {
  std::vector<std::string> names;
  DIR *d = opendir(dir.c_str());
  if (d == nullptr) return names;
  while (struct dirent *e = readdir(d)) {
    absl::string_view name = e->d_name;
    if (name != "." && name != "..") names.emplace_back(name);
  }
  closedir(d);
  return names;
}

}  // namespace

absl::Status Store::ForEachEntry(
    const std::function<bool(const EntryKey &)> &visit) const {
  CountOps(1);
  for (const std::string &version_dir : ListDir(options_.root)) {
    if (!absl::StartsWith(version_dir, "neuronxcc-")) continue;
    const std::string version = version_dir.substr(strlen("neuronxcc-"));
    CountOps(1);
    for (const std::string &module_dir :
         ListDir(absl::StrCat(options_.root, "/", version_dir))) {
      if (!absl::StartsWith(module_dir, "MODULE_")) continue;
      absl::StatusOr<EntryKey> id =
          EntryKey::Parse(NamespaceName(options_.ns), version,
                          module_dir.substr(strlen("MODULE_")));
      if (!id.ok()) continue;  // not ours to touch
      if (!visit(*id)) return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

EntryState Store::Inspect(const EntryKey &id) const {
  EntryState state;
  const std::string dir = EntryDir(id);
  struct stat st;
  CountOps(1);
  if (lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return state;
  state.exists = true;
  const std::string artifact(ArtifactName());
  for (const std::string &name : ListDir(dir)) {
    CountOps(1);
    if (lstat(absl::StrCat(dir, "/", name).c_str(), &st) != 0) continue;
    const absl::Time mtime = absl::TimeFromTimespec(st.st_mtim);
    if (name == artifact && S_ISREG(st.st_mode)) {
      state.has_artifact = true;
      state.artifact_size = st.st_size;
      state.artifact_mtime = mtime;
    } else if (name == "model.done") {
      state.has_done = true;
      state.done_mtime = mtime;
    } else if (name == "model.log") {
      state.has_log = true;
    } else if (name == "model.hlo.pb" || name == "compile_flags.txt") {
      state.legacy_inputs = true;
    } else if (absl::EndsWith(name, ".lock")) {
      state.lock_files.emplace_back(name, mtime);
    }
  }
  return state;
}

absl::Status Store::Remove(const EntryKey &id) {
  const std::string trash = absl::StrCat(options_.root, "/.trash");
  if (absl::Status s = MakeDirs(trash); !s.ok()) return s;
  const std::string target = absl::StrCat(
      trash, "/", UniqueTempName(id.key(), options_.host_id).substr(1));
  CountOps(2);
  if (rename(EntryDir(id).c_str(), target.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, "removing " + EntryDir(id));
  }
  std::error_code ignored;
  std::filesystem::remove_all(target, ignored);
  return absl::OkStatus();
}

absl::Status Store::RemoveLockFile(const EntryKey &id,
                                   const std::string &name) {
  if (!absl::EndsWith(name, ".lock") || absl::StrContains(name, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is not a lock file"));
  }
  const std::string path = absl::StrCat(EntryDir(id), "/", name);
  const std::string doomed =
      absl::StrCat(path, ".broken.", options_.host_id, ".", getpid());
  CountOps(2);
  if (rename(path.c_str(), doomed.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, "breaking " + path);
  }
  unlink(doomed.c_str());
  return absl::OkStatus();
}

absl::StatusOr<absl::Time> Store::FilesystemNow() const {
  const std::string dir = absl::StrCat(options_.root, "/.neffd");
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  const std::string path = absl::StrCat(dir, "/clock.", options_.host_id);
  CountOps(2);
  UniqueFd fd(open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  struct stat st;
  if (!fd.valid() || futimens(fd.get(), nullptr) != 0 ||
      fstat(fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, "touching " + path);
  }
  return absl::TimeFromTimespec(st.st_mtim);
}

}  // namespace neffd
