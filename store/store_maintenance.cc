// Store's maintenance half: listing, inspecting and removing entries.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "store/done_record.h"
#include "store/file_util.h"
#include "store/layout.h"
#include "store/store.h"

namespace neffd {
namespace {

// Names in `dir` (not "." or ".."); empty if it cannot be read.
std::vector<std::string> ListDir(Env& env, const std::string& dir) {
  return env.ListDir(dir).value_or(std::vector<std::string>{});
}

// True for a name UniqueTempName made (".{base}.tmp.{host}.{pid}.{rand}").
bool IsTempName(absl::string_view name) {
  return absl::StartsWith(name, ".") && absl::StrContains(name, ".tmp.");
}

// Bytes of the regular files at or under `path` and the newest mtime among
// them and their directories; symlinks are not followed.
void MeasureTree(Env& env, const std::string& path, uint64_t* bytes,
                 absl::Time* newest) {
  struct stat st;
  if (!env.Lstat(path, &st).ok()) return;
  *newest = std::max(*newest, absl::TimeFromTimespec(st.st_mtim));
  if (S_ISREG(st.st_mode)) *bytes += st.st_size;
  if (!S_ISDIR(st.st_mode)) return;
  for (const std::string& name : ListDir(env, path)) {
    MeasureTree(env, absl::StrCat(path, "/", name), bytes, newest);
  }
}

}  // namespace

absl::Status Store::ForEachEntry(
    const std::function<bool(const EntryKey&)>& visit) const {
  // Shard directories are two characters, never hidden (store/layout.h);
  // quarantine/, .trash/, .neffd/ and libneuronxla's trees are not.
  auto is_shard = [](absl::string_view name) {
    return name.size() == 2 && name[0] != '.';
  };
  for (const std::string& first : ListDir(env_, options_.root)) {
    if (!is_shard(first)) continue;
    const std::string first_dir = absl::StrCat(options_.root, "/", first);
    for (const std::string& second : ListDir(env_, first_dir)) {
      if (!is_shard(second)) continue;
      const std::string shard = absl::StrCat(first, "/", second);
      std::set<std::string> keys;  // an artifact and its records: one entry
      for (const std::string& name :
           ListDir(env_, absl::StrCat(options_.root, "/", shard))) {
        std::string key;
        const ShardName kind =
            ClassifyShardName(options_.ns, shard, name, &key);
        if (kind == ShardName::kArtifact || kind == ShardName::kRecords) {
          keys.insert(std::move(key));
        }
      }
      for (const std::string& key : keys) {
        // The version the entry was recorded for, so the index, the access
        // journals and this host's last uses (keyed by it) know the entry.
        std::string version;
        absl::StatusOr<std::string> done = ReadSmallFile(
            absl::StrCat(options_.root, "/", RecordsRelDir(key), "/model.done"),
            1 << 20, &env_);
        if (done.ok() && !done->empty()) {
          absl::StatusOr<v1::DoneRecord> record = ParseDoneRecord(*done);
          if (record.ok()) version = record->compiler_version();
        }
        absl::StatusOr<EntryKey> id =
            EntryKey::Parse(NamespaceName(options_.ns), version, key);
        if (!id.ok()) id = EntryKey::Parse(NamespaceName(options_.ns), "", key);
        if (!id.ok()) continue;  // not ours to touch
        if (!visit(*id)) return absl::OkStatus();
      }
    }
  }
  return absl::OkStatus();
}

EntryState Store::Inspect(const EntryKey& id) const {
  EntryState state;
  const EntryPaths paths = PathsOf(id);
  struct stat st;
  if (env_.Lstat(paths.artifact(), &st).ok()) {
    state.exists = true;
    if (S_ISREG(st.st_mode) && st.st_size > 0) {
      state.has_artifact = true;
      state.artifact_size = st.st_size;
      state.artifact_mtime = absl::TimeFromTimespec(st.st_mtim);
    }
  }
  // This entry's temp files: the artifact's beside it, the records' in the
  // records directory.
  const std::string artifact_temp =
      absl::StrCat(".", paths.artifact_name, ".tmp.");
  auto add_temp = [&state](const std::string& name, const struct stat& st) {
    state.temp_files.push_back({name, static_cast<uint64_t>(st.st_size),
                                absl::TimeFromTimespec(st.st_mtim)});
  };
  for (const std::string& name : ListDir(env_, paths.artifact_dir)) {
    if (absl::StartsWith(name, artifact_temp) &&
        env_.Lstat(absl::StrCat(paths.artifact_dir, "/", name), &st).ok() &&
        S_ISREG(st.st_mode)) {
      add_temp(name, st);
    }
  }
  const std::string& dir = paths.records_dir;
  if (!env_.Lstat(dir, &st).ok() || !S_ISDIR(st.st_mode)) return state;
  state.exists = true;
  for (const std::string& name : ListDir(env_, dir)) {
    if (!env_.Lstat(absl::StrCat(dir, "/", name), &st).ok()) continue;
    const absl::Time mtime = absl::TimeFromTimespec(st.st_mtim);
    if (name == paths.done_name) {
      state.has_done = true;
      state.done_mtime = mtime;
    } else if (name == paths.log_name) {
      state.has_log = true;
    } else if (IsLockFileName(name)) {
      state.lock_files.emplace_back(name, mtime);
    } else if (IsTempName(name) && S_ISREG(st.st_mode)) {
      add_temp(name, st);
    }
  }
  return state;
}

absl::Status Store::Remove(const EntryKey& id) {
  const std::string trash = absl::StrCat(options_.root, "/.trash");
  const std::string target = absl::StrCat(
      trash, "/", UniqueTempName(id.key(), options_.host_id).substr(1));
  if (absl::Status s = MakeGroupDirs(target, kSharedDirMode, &env_); !s.ok()) {
    return s;
  }
  const EntryPaths paths = PathsOf(id);
  bool removed = false;
  for (const auto& [from, name] :
       {std::make_pair(paths.artifact(), paths.artifact_name),
        std::make_pair(
            paths.records_dir,
            paths.records_dir.substr(paths.artifact_dir.size() + 1))}) {
    absl::Status moved = env_.Rename(from, absl::StrCat(target, "/", name));
    if (moved.ok()) {
      removed = true;
    } else if (!absl::IsNotFound(moved)) {
      (void)RemoveTree(target, &env_);
      return moved;
    }
  }
  // The entry is gone once renamed; what cannot be deleted stays in .trash.
  (void)RemoveTree(target, &env_);
  if (!removed) {
    return absl::NotFoundError(absl::StrCat("no entry ", id.Canonical()));
  }
  return absl::OkStatus();
}

absl::Status Store::RemoveTempFile(const EntryKey& id,
                                   const std::string& name) {
  if (!IsTempName(name) || absl::StrContains(name, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is not a temp file's name"));
  }
  const EntryPaths paths = PathsOf(id);
  const bool artifacts =
      absl::StartsWith(name, absl::StrCat(".", paths.artifact_name, ".tmp."));
  return env_.Unlink(absl::StrCat(
      artifacts ? paths.artifact_dir : paths.records_dir, "/", name));
}

absl::StatusOr<AsideSweep> Store::SweepAside(AsideDir dir,
                                             const AsideBounds& bounds,
                                             absl::Time now) {
  const std::string path = absl::StrCat(
      options_.root, dir == AsideDir::kQuarantine ? "/quarantine" : "/.trash");
  absl::StatusOr<std::vector<std::string>> names = env_.ListDir(path);
  if (absl::IsNotFound(names.status())) return AsideSweep();
  if (!names.ok()) return names.status();
  struct Item {
    std::vector<std::string> names;
    uint64_t bytes = 0;
    absl::Time newest = absl::InfinitePast();
  };
  std::map<std::string, Item> by_name;
  for (const std::string& name : *names) {
    absl::string_view item = name;
    absl::ConsumeSuffix(&item, ".reason");
    Item& it = by_name[std::string(item)];
    it.names.push_back(name);
    MeasureTree(env_, absl::StrCat(path, "/", name), &it.bytes, &it.newest);
  }
  std::vector<Item> items;
  uint64_t total = 0;
  for (auto& [name, item] : by_name) {
    total += item.bytes;
    items.push_back(std::move(item));
  }
  std::sort(items.begin(), items.end(),
            [](const Item& a, const Item& b) { return a.newest < b.newest; });
  AsideSweep sweep;
  for (const Item& item : items) {
    const bool too_old = now - item.newest > bounds.max_age;
    const bool over_size = bounds.max_bytes > 0 && total > bounds.max_bytes;
    AsideCounts& counts = too_old || over_size ? sweep.removed : sweep.kept;
    ++counts.items;
    counts.bytes += item.bytes;
    if (&counts == &sweep.kept) continue;
    total -= item.bytes;
    if (bounds.dry_run) continue;
    for (const std::string& name : item.names) {
      (void)RemoveTree(absl::StrCat(path, "/", name), &env_);
    }
  }
  return sweep;
}

absl::Status Store::RemoveLockFile(const EntryKey& id,
                                   const std::string& name) {
  if (!IsLockFileName(name) || absl::StrContains(name, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " is not a lock file"));
  }
  const std::string path = absl::StrCat(PathsOf(id).records_dir, "/", name);
  const std::string doomed =
      absl::StrCat(path, ".broken.", options_.host_id, ".", getpid());
  if (absl::Status s = env_.Rename(path, doomed); !s.ok()) return s;
  (void)env_.Unlink(doomed);
  return absl::OkStatus();
}

absl::StatusOr<absl::Time> Store::FilesystemNow() const {
  const std::string dir = absl::StrCat(options_.root, "/.neffd");
  if (absl::Status s = MakeGroupDirs(dir, kSharedDirMode, &env_); !s.ok())
    return s;
  const std::string path = absl::StrCat(dir, "/clock.", options_.host_id);
  // O_NONBLOCK | O_NOFOLLOW: a FIFO or symlink planted there fails the open
  // rather than blocking it or touching another file.
  absl::StatusOr<UniqueFd> fd =
      env_.Open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK, 0644);
  if (!fd.ok()) return fd.status();
  struct stat st;
  if (absl::Status s = env_.Touch(fd->get(), path); !s.ok()) return s;
  if (absl::Status s = env_.Fstat(fd->get(), path, &st); !s.ok()) return s;
  return absl::TimeFromTimespec(st.st_mtim);
}

}  // namespace neffd
