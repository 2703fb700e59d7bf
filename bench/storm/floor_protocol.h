// bench/storm/floor_protocol.h
//
// The storm's floor: what no cache protocol can beat on this machine. The
// rank that compiles holds an exclusive flock on the graph's lock file before
// the driver lets the other ranks start; they block for a shared lock on it,
// so the kernel wakes them all the instant the NEFF is in place. No lookup,
// no verification, no durability, no polling: only the compile, one wake-up
// and every rank's own read of the NEFF remain. It relies on the driver's
// ordering (bench/storm/storm.cc), so it is a yardstick, not a protocol.
// With `durable` the compiling rank writes the NEFF as the hand-written
// durable write does (bench/publish_bench.cc): data fsynced before the
// rename, the directory after it, before the others are woken: the floor of
// a protocol whose answer means "survives a power loss".
//
// Thread-compatible (one per rank).
#ifndef NEFFD_BENCH_STORM_FLOOR_PROTOCOL_H_
#define NEFFD_BENCH_STORM_FLOOR_PROTOCOL_H_

#include <functional>
#include <string>

#include "absl/status/statusor.h"
#include "bench/storm/legacy_protocol.h"

namespace neffd::bench {

// The compiling rank (`compiles`) takes the lock, calls `locked` (it tells
// the driver, which then starts the other ranks), runs `compile(out_path)`
// and moves the NEFF into place (`released` is then; with `durable`, once
// the NEFF and its name are fsynced); every other rank waits for it.
absl::StatusOr<DirectResult> FloorGetOrCompile(
    const std::string& entry_dir, bool compiles, bool durable,
    const std::function<void()>& locked,
    const std::function<absl::Status(const std::string& out_path)>& compile);

}  // namespace neffd::bench

#endif  // NEFFD_BENCH_STORM_FLOOR_PROTOCOL_H_
