// store/lock_paths.h
//
// Where the locks of an entry live, for every process that takes them: the
// daemon (its leases) and daemon-less ranks (the fallback mode) must name the
// same files or they do not exclude each other.
//
//   Host-local flock:    {locks_dir}/{ns}/{compiler_version}/{key}.lock
//   Cross-host lease:    {entry_dir}/model.hlo_module.pb.lock on the shared
//                        store (libneuronxla's own lock-file name, so its
//                        processes and neffd see each other's compiles)
//
// Thread-safe.
#ifndef NEFFD_STORE_LOCK_PATHS_H_
#define NEFFD_STORE_LOCK_PATHS_H_

#include <string>

#include "absl/status/statusor.h"
#include "store/entry_id.h"
#include "store/file_util.h"

namespace neffd {

// The cross-host lease file inside an entry directory; present while some
// host compiles the entry.
inline constexpr char kLeaseFileName[] = "model.hlo_module.pb.lock";

// {locks_dir}/{ns}/{compiler_version}/{key}.lock
std::string LockFilePath(const std::string &locks_dir, const EntryKey &id);

// Opens the host-local lock file of `id` for flock, creating it (0664) and
// its directories (0775) as needed through `env`; never follows a symlink at
// the file. An error names the path.
absl::StatusOr<UniqueFd> OpenLockFile(const std::string &locks_dir,
                                      const EntryKey &id,
                                      Env *env = Env::Default());

}  // namespace neffd

#endif  // NEFFD_STORE_LOCK_PATHS_H_
