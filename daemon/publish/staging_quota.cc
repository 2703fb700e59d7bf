#include "daemon/publish/staging_quota.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>

#include "absl/strings/str_cat.h"

namespace neffd {

std::vector<StagingQuota::Staged> StagingQuota::List() const {
  std::vector<Staged> staged;
  absl::StatusOr<std::vector<std::string>> names =
      options_.env->ListDir(options_.dir);
  if (!names.ok()) return staged;
  for (const std::string& name : *names) {
    struct stat st;
    if (!options_.env->Lstat(absl::StrCat(options_.dir, "/", name), &st).ok() ||
        !S_ISREG(st.st_mode)) {
      continue;
    }
    staged.push_back({name, st.st_uid, static_cast<uint64_t>(st.st_size),
                      absl::TimeFromTimespec(st.st_mtim)});
  }
  return staged;
}

absl::Status StagingQuota::Check(const std::string& path) const {
  if (options_.quota_per_uid == 0) return absl::OkStatus();
  struct stat st;
  if (absl::Status s = options_.env->Lstat(path, &st); !s.ok()) return s;
  uint64_t total = 0;
  for (const Staged& file : List()) {
    if (file.uid == st.st_uid) total += file.size;
  }
  if (total <= options_.quota_per_uid) return absl::OkStatus();
  return absl::ResourceExhaustedError(absl::StrCat(
      "staged_path: uid ", st.st_uid, " has ", total, " bytes staged in ",
      options_.dir, ", over --staging_quota_per_uid (", options_.quota_per_uid,
      "); the output stays in its working directory"));
}

std::vector<std::string> StagingQuota::Sweep() const {
  std::vector<Staged> staged = List();
  // Oldest first, so that over-quota users lose their oldest files.
  std::sort(staged.begin(), staged.end(),
            [](const Staged& a, const Staged& b) { return a.mtime < b.mtime; });
  std::map<uid_t, uint64_t> total;
  for (const Staged& file : staged) total[file.uid] += file.size;
  const absl::Time now = options_.env->Now();
  std::vector<std::string> removed;
  for (const Staged& file : staged) {
    const bool over =
        options_.quota_per_uid != 0 && total[file.uid] > options_.quota_per_uid;
    if (!over && now - file.mtime <= options_.max_age) continue;
    if (options_.env->Unlink(absl::StrCat(options_.dir, "/", file.name)).ok()) {
      total[file.uid] -= file.size;
      removed.push_back(file.name);
    }
  }
  return removed;
}

}  // namespace neffd
