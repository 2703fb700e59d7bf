// daemon/runtime/local_dir.h
//
// The host's local directory ({local_dir}, TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR;
// docs/ARCHITECTURE.md, "On-disk layout"): where neffd keeps each part of
// its per-host state, and the checks that make the directory fit to share
// with the ranks:
//
//   locks/    the per-key host-local flocks (locks/.gc: the gc leases')
//   staging/  ranks' compile outputs on their way in
//   tier/     verified local copies handed to ranks
//   wake/     the wake notices parked ranks wait on
//   (daemon/locks/wake_notices.h) index/    RocksDB (the default of
//   --index_dir)
//
// PrepareLocalDir refuses a local dir on a network filesystem (NFS, Lustre,
// SMB), whose lock semantics the flocks cannot rely on; creates what is
// missing; and on every start sets locks/, staging/, tier/ and wake/ to the
// modes of docs/SECURITY.md in the ranks' group, so a directory an older neffd
// made (staging was 01777) is closed. It fails naming the path and the reason,
// and never removes anything.
//
// Thread-compatible (a value type and functions of the filesystem).
#ifndef NEFFD_DAEMON_RUNTIME_LOCAL_DIR_H_
#define NEFFD_DAEMON_RUNTIME_LOCAL_DIR_H_

#include <string>

#include "absl/status/status.h"

namespace neffd {

struct LocalDir {
  std::string root;

  std::string locks() const { return root + "/locks"; }
  std::string staging() const { return root + "/staging"; }
  std::string tier() const { return root + "/tier"; }
  std::string wake() const { return root + "/wake"; }
  std::string index() const { return root + "/index"; }
};

// FailedPrecondition naming the filesystem if `path` is on NFS, Lustre or
// SMB; NotFound (or another errno status) naming `path` if it cannot be
// looked at.
absl::Status CheckLocalDirFilesystem(const std::string& path);

// Creates `dir` and its locks/, staging/, tier/ and wake/ and gives them their
// modes, in `socket_group` when that group exists (else the creator's).
absl::Status PrepareLocalDir(const LocalDir& dir,
                             const std::string& socket_group);

}  // namespace neffd

#endif  // NEFFD_DAEMON_RUNTIME_LOCAL_DIR_H_
