// config/defaults.h
//
// The defaults that more than one options struct (and a flag) share,
// declared once: the daemon's flags, DaemonOptions, the store's, the
// maintenance's and the client's options all take them from here, so a
// default changes in one line. A default only one struct uses stays
// beside its field.
#ifndef NEFFD_CONFIG_DEFAULTS_H_
#define NEFFD_CONFIG_DEFAULTS_H_

#include <cstdint>

#include "absl/time/time.h"

namespace neffd::config {

// How long a rank waits for another's compile of the same key:
// TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT's default in the spec (1200 s). A
// lock file older than this is stale.
inline constexpr absl::Duration kLockTimeout = absl::Seconds(1200);

// How long a recorded compile failure is served before a rank retries it
// (ccache and sccache do not cache failures at all; an hour keeps 128
// ranks from recompiling a broken graph in a loop while still retrying
// after a compiler fix).
inline constexpr absl::Duration kFailedTtl = absl::Hours(1);

// gc removes a crashed publish's temp files older than this.
inline constexpr absl::Duration kTempGrace = absl::Hours(1);

// gc removes what removed entries left in {cache_dir}/.trash after this
// long, and keeps .trash within kTrashBytes.
inline constexpr absl::Duration kTrashAge = absl::Hours(1);
inline constexpr uint64_t kTrashBytes = uint64_t{1} << 30;

// gc removes quarantined entries older than this, and keeps
// {cache_dir}/quarantine within kQuarantineBytes: long enough for an
// operator to look at damage after a weekend.
inline constexpr absl::Duration kQuarantineAge = absl::Hours(24 * 7);
inline constexpr uint64_t kQuarantineBytes = uint64_t{4} << 30;

// The largest entry a client may publish.
inline constexpr uint64_t kMaxEntryBytes = uint64_t{8} << 30;

}  // namespace neffd::config

#endif  // NEFFD_CONFIG_DEFAULTS_H_
