// daemon/publish/staging_quota.h
//
// Keeps the staging directory ({local_dir}/staging, shared by every rank of
// the group) from filling the local disk: each uid may have at most
// `quota_per_uid` bytes staged (the sum of its regular files there).
//
//   - Check(path) is asked before a staged file is published: a publish
//     whose owner is over the quota is refused RESOURCE_EXHAUSTED (the
//     message names the flag), and the rank keeps its compile output.
//   - Sweep() runs periodically: it removes, oldest first, the files of
//     each uid over its quota, and any staged file older than `max_age`
//     (left by a rank that died between staging and publishing; a live
//     publish takes seconds). A file removed while its publish runs costs
//     that publish its tier adoption only: the store reads through its fd.
//
// The quota is per uid because the files' owners are the only identity the
// directory has; it bounds what a user's ranks can stage together, like a
// filesystem quota on the directory would, without needing one.
//
// Every filesystem call and clock reading goes through `env`. Thread-safe
// (no state between calls).
#ifndef NEFFD_DAEMON_PUBLISH_STAGING_QUOTA_H_
#define NEFFD_DAEMON_PUBLISH_STAGING_QUOTA_H_

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "store/env.h"

namespace neffd {

struct StagingQuotaOptions {
  std::string dir;             // {local_dir}/staging
  uint64_t quota_per_uid = 0;  // bytes; 0: no quota
  absl::Duration max_age = absl::Hours(1);
  Env* env = Env::Default();  // not owned
};

class StagingQuota {
 public:
  explicit StagingQuota(StagingQuotaOptions options)
      : options_(std::move(options)) {}

  // ResourceExhausted if the owner of the staged file `path` has more than
  // its quota staged (this file included).
  absl::Status Check(const std::string& path) const;

  // Removes what is over quota or too old; returns the removed names.
  std::vector<std::string> Sweep() const;

 private:
  struct Staged {
    std::string name;
    uid_t uid;
    uint64_t size;
    absl::Time mtime;
  };
  std::vector<Staged> List() const;

  const StagingQuotaOptions options_;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_PUBLISH_STAGING_QUOTA_H_
