// Store's migration half: entries in the layout before TorchNeuron's
// (neuronxcc-{version}/MODULE_{key}/) move into it (store.h, "Migration").
#include <sys/stat.h>

#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "store/done_record.h"
#include "store/file_util.h"
#include "store/store.h"

namespace neffd {
namespace {

constexpr char kOldVersionPrefix[] = "neuronxcc-";
constexpr char kOldModulePrefix[] = "MODULE_";
constexpr size_t kMaxOldRecordBytes = 1 << 20;

}  // namespace

std::string Store::OldLayoutDir(const EntryKey& id) const {
  return absl::StrCat(options_.root, "/", kOldVersionPrefix,
                      id.compiler_version(), "/", kOldModulePrefix, id.key());
}

absl::Status Store::ForEachOldLayoutEntry(
    const std::function<bool(const EntryKey&)>& visit) const {
  for (const std::string& version_dir :
       env_.ListDir(options_.root).value_or(std::vector<std::string>{})) {
    if (!absl::StartsWith(version_dir, kOldVersionPrefix)) continue;
    const std::string version = version_dir.substr(strlen(kOldVersionPrefix));
    if (version.empty()) continue;  // the old layout always named one
    for (const std::string& module_dir :
         env_.ListDir(absl::StrCat(options_.root, "/", version_dir))
             .value_or(std::vector<std::string>{})) {
      if (!absl::StartsWith(module_dir, kOldModulePrefix)) continue;
      absl::StatusOr<EntryKey> id =
          EntryKey::Parse(NamespaceName(options_.ns), version,
                          module_dir.substr(strlen(kOldModulePrefix)));
      if (!id.ok()) continue;  // not ours to touch
      if (!visit(*id)) return absl::OkStatus();
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<Store::Migration> Store::MigrateOldLayoutEntry(
    const EntryKey& id) {
  const std::string dir = OldLayoutDir(id);
  for (const std::string& name :
       env_.ListDir(dir).value_or(std::vector<std::string>{})) {
    if (IsLockFileName(name)) return Migration::kLocked;
  }
  const std::string old_artifact =
      absl::StrCat(dir, "/", ArtifactFileName(options_.ns));
  struct stat st;
  if (!env_.Lstat(old_artifact, &st).ok() || !S_ISREG(st.st_mode) ||
      st.st_size == 0) {
    return Migration::kIncomplete;
  }
  const EntryPaths paths = PathsOf(id);
  if (env_.Lstat(paths.artifact(), &st).ok()) return Migration::kAlreadyHere;
  // The old record, if it is one (libneuronxla's marker is empty).
  std::optional<v1::DoneRecord> old_done;
  absl::StatusOr<std::string> text = ReadSmallFile(
      absl::StrCat(dir, "/model.done"), kMaxOldRecordBytes, &env_);
  if (text.ok() && !text->empty()) {
    absl::StatusOr<v1::DoneRecord> parsed = ParseDoneRecord(*text);
    if (parsed.ok()) old_done = *std::move(parsed);
  }
  if (absl::Status s = MakeGroupDirs(paths.records_dir, kSharedDirMode, &env_,
                                     /*durably=*/true);
      !s.ok()) {
    return s;
  }
  // Key inputs first: once the artifact is in, the entry is served.
  absl::Status flags = env_.Rename(absl::StrCat(dir, "/", kKeyInputsFileName),
                                   paths.key_inputs());
  if (!flags.ok() && !absl::IsNotFound(flags)) return flags;
  if (absl::Status s = env_.Rename(old_artifact, paths.artifact()); !s.ok()) {
    return s;
  }
  if (absl::Status s = env_.SyncDir(paths.artifact_dir); !s.ok()) return s;
  // Find hashes the moved file; it records it only when there is no old
  // record, whose producer and metadata are kept (written once, below) when
  // its digest agrees.
  absl::StatusOr<StoredEntry> found = Find(
      id, old_done.has_value() ? OnDamage::kReport : OnDamage::kQuarantine);
  if (!found.ok()) return found.status();
  if (old_done.has_value()) {
    if (old_done->sha256() != found->entry.sha256() ||
        old_done->size() != found->entry.size()) {
      absl::StatusOr<std::string> moved = Quarantine(
          id, absl::StrCat("migrated artifact is ", found->entry.size(),
                           " bytes, sha256 ", found->entry.sha256(),
                           "; its old model.done says ", old_done->size(),
                           " bytes, sha256 ", old_done->sha256()));
      if (!moved.ok()) return moved.status();
      (void)RemoveTree(paths.records_dir, &env_);
      (void)RemoveTree(dir, &env_);
      return Migration::kDamaged;
    }
    old_done->set_compiler_version(id.compiler_version());
    old_done->set_key(id.key());
    old_done->set_artifact_inode(found->identity.inode);
    if (absl::Status s = WriteDone(id, *old_done); !s.ok()) return s;
  }
  (void)RemoveTree(dir, &env_);
  (void)env_.Rmdir(dir.substr(0, dir.rfind('/')));  // the last of a version
  return Migration::kMoved;
}

}  // namespace neffd
