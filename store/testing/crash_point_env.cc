#include "store/testing/crash_point_env.h"

#include <signal.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace neffd {

const std::vector<CrashPoint>& PublishCrashPoints() {
  static const auto* const points = new std::vector<CrashPoint>{
      {"temp_written", FsOp::kSync, ".neff.tmp.", 1, false, ""},
      {"data_synced", FsOp::kSync, ".neff.tmp.", 1, true, ""},
      {"renamed", FsOp::kRename, ".neff.tmp.", 1, true, ""},
      {"dir_synced", FsOp::kSyncDir, "/", 1, true, ".neff.tmp."},
      {"done_written", FsOp::kSync, ".model.done.tmp.", 1, false, ""},
      {"done_synced", FsOp::kSync, ".model.done.tmp.", 1, true, ""},
      {"done_renamed", FsOp::kRename, ".model.done.tmp.", 1, true, ""},
      {"published", FsOp::kSyncDir, ".neffd", 1, true, ".model.done.tmp."},
  };
  return *points;
}

absl::StatusOr<CrashPoint> FindCrashPoint(absl::string_view name) {
  std::vector<std::string> names;
  for (const CrashPoint& point : PublishCrashPoints()) {
    if (point.name == name) return point;
    names.push_back(point.name);
  }
  return absl::InvalidArgumentError(absl::StrCat("no crash point '", name,
                                                 "'; the points are ",
                                                 absl::StrJoin(names, ", ")));
}

void CrashPointEnv::MaybeCrash(const FsCall& call, bool after) {
  if (!armed_ || after != point_.after || call.op != point_.op ||
      !absl::StrContains(call.path, point_.path_contains)) {
    return;
  }
  if (seen_.fetch_add(1) + 1 != point_.nth) return;
  // What a test reads to know the point was reached, then the crash.
  const std::string line =
      absl::StrCat("crash_point name=", point_.name, " path=", call.path, "\n");
  (void)!write(STDERR_FILENO, line.data(), line.size());
  kill(getpid(), SIGKILL);
}

absl::Status CrashPointEnv::BeforeCall(const FsCall& call) {
  MaybeCrash(call, /*after=*/false);
  return absl::OkStatus();
}

absl::Status CrashPointEnv::Sync(int fd, absl::string_view name) {
  absl::Status s = EnvWrapper::Sync(fd, name);
  if (s.ok()) MaybeCrash({FsOp::kSync, name}, /*after=*/true);
  return s;
}

absl::Status CrashPointEnv::SyncDir(const std::string& dir) {
  absl::Status s = EnvWrapper::SyncDir(dir);
  if (s.ok()) MaybeCrash({FsOp::kSyncDir, dir}, /*after=*/true);
  return s;
}

absl::Status CrashPointEnv::Rename(const std::string& from,
                                   const std::string& to) {
  absl::Status s = EnvWrapper::Rename(from, to);
  if (!s.ok()) return s;
  MaybeCrash({FsOp::kRename, from, to}, /*after=*/true);
  if (!point_.armed_by.empty() && absl::StrContains(from, point_.armed_by)) {
    armed_ = true;
  }
  return s;
}

}  // namespace neffd
