// client/fs_backend.h (internal to the client library)
//
// FilesystemBackend is the client's fallback mode: the daemon's protocol run
// directly on the cache directories when neffd is unreachable.
//   Lookup  Store::Find (verifies size and sha256) / Store::FindFailure; a
//           damaged entry reads as a miss.
//   Lock    exclusive flock on {local_dir}/locks/{ns}/{version}/{key}.lock,
//           the file the daemon locks while it has a lease out, so daemon
//           users and fallback users exclude each other; the store is checked
//           again once the lock is held. A just-published entry is verified
//           after letting the lock go, so a host's waiters hash it at once
//           rather than one after another; damaged entries are quarantined
//           only under the lock, where no publish of this host can race it.
//   Publish Store::PublishFromFd (atomic, the daemon's layout) while the lock
//           is held; Fail is Store::RecordFailure.
// The stores are opened on first use, so a rank that never falls back never
// needs write access to the cache roots.
//
// Thread-safe.
#ifndef NEFFD_CLIENT_FS_BACKEND_H_
#define NEFFD_CLIENT_FS_BACKEND_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/backend.h"
#include "client/file_lock.h"
#include "config/defaults.h"
#include "store/env.h"
#include "store/store.h"

namespace neffd {

struct FilesystemBackendOptions {
  std::string neff_cache_dir;
  std::string hlo_cache_dir;
  std::string local_dir;  // locks live in {local_dir}/locks
  std::string host;
  absl::Duration failed_ttl = config::kFailedTtl;
  Env* env = Env::Default();  // the filesystem and the clock
};

class FilesystemBackend : public Backend {
 public:
  explicit FilesystemBackend(FilesystemBackendOptions options);

  absl::StatusOr<v1::LookupResponse> Lookup(const EntryKey& id) override;
  absl::StatusOr<LockAnswer> Lock(const EntryKey& id,
                                  absl::Duration wait) override;

 private:
  class FsLease;
  absl::StatusOr<Store*> StoreFor(Namespace ns);
  absl::StatusOr<v1::LookupResponse> LookupIn(const EntryKey& id,
                                              Store::OnDamage on_damage);

  const FilesystemBackendOptions options_;
  absl::Mutex mu_;
  std::unique_ptr<Store> neff_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Store> hlo_ ABSL_GUARDED_BY(mu_);
};

}  // namespace neffd

#endif  // NEFFD_CLIENT_FS_BACKEND_H_
