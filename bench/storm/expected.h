// bench/storm/expected.h
//
// The bytes every storm rank must end up with for graph g: the fake
// compiler's output for key "storm{g}", written once per (graph, size) into
// a reference directory by the driver before anything is timed, so a rank
// checks what it read with one memcmp instead of regenerating or hashing
// 8 MiB per graph (which, times 128 ranks, would cost more than the protocol
// being measured).
#ifndef NEFFD_BENCH_STORM_EXPECTED_H_
#define NEFFD_BENCH_STORM_EXPECTED_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neffd::bench {

// The key of graph g.
std::string GraphKey(int g);

// Makes sure {dir}/{GraphKey(g)}.{bytes} holds the expected bytes for every
// g < graphs (files already there with the right size are kept).
absl::Status WriteExpected(const std::string& dir, int graphs, int64_t bytes);

// Reads the whole file at `path` into `buffer`, sized from fstat. A rank
// keeps one buffer for every step, as a runtime's loader would: allocating
// 8 MiB afresh per step costs more CPU in page faults and zeroing than the
// read itself, and that cost would swamp the protocols being compared.
absl::Status ReadWhole(const std::string& path, std::string* buffer);

// True if `content` equals the reference file for `key`.
bool MatchesExpected(const std::string& dir, const std::string& key,
                     absl::string_view content);

}  // namespace neffd::bench

#endif  // NEFFD_BENCH_STORM_EXPECTED_H_
