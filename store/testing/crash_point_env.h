// store/testing/crash_point_env.h
//
// CrashPointEnv wraps an Env and SIGKILLs its own process at one chosen
// point of a publish, for crash-point tests of the store's durability order
// (store/store.h, PublishFromFd): the test runs a real daemon built with it
// (tests/faults:neffd_crash_points, NEFFD_TEST_CRASH_AT=<point>), publishes,
// restarts a plain daemon and checks that the entry is absent or whole.
//
// A point is one filesystem call of the publish sequence, matched by its
// kind, a substring of its path, which matching call it is, and optionally
// only once a rename from a path holding `armed_by` has happened; the
// process dies just before that call is made or just after it returned. The
// points, in publish order (store/layout.h names the files):
//
//   temp_written   before the artifact's temp file is fsynced (the bytes
//                  are verified: the daemon's S3 upload intent,
//                  daemon/remote_tier/outbox.h, is durable by then)
//   data_synced    after it was fsynced
//   renamed        after it was renamed to {key}.neff
//   dir_synced     after the shard directory was fsynced (the artifact's
//                  name)
//   done_written   before model.done's temp file is fsynced
//   done_synced    after it was fsynced
//   done_renamed   after it was renamed to model.done
//   published      after the records directory was fsynced: durable, but
//                  the client has not been answered (nor the index written:
//                  where the daemon used to queue the S3 upload)
//
// Only the NEFF store's artifact ({key}.neff) is covered: the tests publish
// neff entries. Nothing in a production binary uses this file.
//
// Thread-safe.
#ifndef NEFFD_STORE_TESTING_CRASH_POINT_ENV_H_
#define NEFFD_STORE_TESTING_CRASH_POINT_ENV_H_

#include <atomic>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/env.h"

namespace neffd {

struct CrashPoint {
  std::string name;
  FsOp op;
  std::string path_contains;
  int nth = 1;        // which matching call (1: the first)
  bool after = true;  // after the call returned; else before it is made
  // If set, calls count only after a rename whose source path holds this.
  std::string armed_by;
};

// Every point, in the order a publish passes them.
const std::vector<CrashPoint>& PublishCrashPoints();

// The point called `name`; InvalidArgument listing the names otherwise.
absl::StatusOr<CrashPoint> FindCrashPoint(absl::string_view name);

class CrashPointEnv : public EnvWrapper {
 public:
  CrashPointEnv(Env* target, CrashPoint point)
      : EnvWrapper(target), point_(std::move(point)) {}

  absl::Status Sync(int fd, absl::string_view name) override;
  absl::Status SyncDir(const std::string& dir) override;
  absl::Status Rename(const std::string& from, const std::string& to) override;

 protected:
  absl::Status BeforeCall(const FsCall& call) override;

 private:
  // Counts `call` if it matches the point (for the side `after` says) and
  // kills the process when it is the nth.
  void MaybeCrash(const FsCall& call, bool after);

  const CrashPoint point_;
  std::atomic<bool> armed_{point_.armed_by.empty()};
  std::atomic<int> seen_{0};
};

}  // namespace neffd

#endif  // NEFFD_STORE_TESTING_CRASH_POINT_ENV_H_
