// store/lock_paths.h
//
// Where the locks of an entry live, for every process that takes them: the
// daemon (its leases) and daemon-less ranks (the fallback mode) must name the
// same files or they do not exclude each other.
//
//   Host-local flock:    {locks_dir}/{key}.lock for a NEFF: TorchNeuron's
//                        own lock file, so its unmodified ranks, neffd's
//                        leases and daemon-less clients all exclude each
//                        other; {locks_dir}/hlo/{compiler_version}/{key}.lock
//                        for an HLO entry (TorchNeuron locks no HLO)
//   Cross-host lease:    {entry_dir}/neffd.lease on the shared store
//
// Thread-safe.
#ifndef NEFFD_STORE_LOCK_PATHS_H_
#define NEFFD_STORE_LOCK_PATHS_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/entry_id.h"
#include "store/file_util.h"

namespace neffd {

// The cross-host lease file inside an entry's records directory; present while
// some host compiles the entry. neffd's own name: `neuron_parallel_compile
// --command clear-locks` and optimum-neuron's cleanup delete `*.lock`, and
// TorchNeuron's cache clear deletes `*.neff`, so a lease never ends in
// either.
inline constexpr char kLeaseFileName[] = "neffd.lease";

// True for a lock or lease file's name in an entry directory: neffd's lease
// or any `*.lock` (an older daemon's lease, libneuronxla's locks).
bool IsLockFileName(absl::string_view name);

// {locks_dir}/{key}.lock (neff) or {locks_dir}/hlo/{key}.lock (hlo). A lock
// does not name the compiler version, as TorchNeuron's does not: the file it
// guards is named by the key alone (store/layout.h).
std::string LockFilePath(const std::string& locks_dir, const EntryKey& id);

// Opens the host-local lock file of `id` for flock, creating it (0660) and
// its directories (kLocalDirMode: group-writable, setgid, nothing for
// others, whatever the umask) as needed through `env`, so the daemon and the
// ranks of its group can each create and lock them; never follows a symlink
// at the file. The descriptor is read-only: flock needs no more. An error
// names the path and says what to fix.
absl::StatusOr<UniqueFd> OpenLockFile(const std::string& locks_dir,
                                      const EntryKey& id,
                                      Env* env = Env::Default());

}  // namespace neffd

#endif  // NEFFD_STORE_LOCK_PATHS_H_
