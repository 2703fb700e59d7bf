// bench/storm/legacy_protocol.h
//
// The baseline neffd replaces: every rank follows libneuronxla's protocol by
// itself, directly on the shared cache directory —
//   check model.done; else create the entry's .lock with O_CREAT|O_EXCL; if
//   it exists, poll for model.done every poll_interval; compile; write
//   model.neff and model.done; remove the lock; read the NEFF from the
//   shared directory.
// Every metadata operation and byte read on the shared directory is counted,
// so the storm benchmark can compare it with the daemon's own counters.
//
// Thread-compatible (one per rank).
#ifndef NEFFD_BENCH_STORM_LEGACY_PROTOCOL_H_
#define NEFFD_BENCH_STORM_LEGACY_PROTOCOL_H_

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace neffd::bench {

struct LegacyCounters {
  uint64_t metadata_ops = 0;  // stat, open, rename, unlink, mkdir
  uint64_t bytes_read = 0;
};

// What a rank holds after a protocol run directly on the shared directory
// (this one, or the floor of bench/storm/floor_protocol.h).
struct DirectResult {
  std::string neff_path;  // in the shared directory
  // When this rank released the entry to the others (its NEFF renamed into
  // place); InfinitePast if another rank compiled it.
  absl::Time released = absl::InfinitePast();
};

// Runs the protocol up to holding a done entry; `compile(out_path)` writes
// the NEFF to out_path.
absl::StatusOr<DirectResult> LegacyGetOrCompile(
    const std::string& entry_dir, absl::Duration poll_interval,
    const std::function<absl::Status(const std::string& out_path)>& compile,
    LegacyCounters* counters);

// Reads the NEFF at `neff_path` into `content`, counted.
absl::Status LegacyRead(const std::string& neff_path, std::string* content,
                        LegacyCounters* counters);

}  // namespace neffd::bench

#endif  // NEFFD_BENCH_STORM_LEGACY_PROTOCOL_H_
