// client/explain.h
//
// "Why did this miss": compares what a key was derived from
// (v1::KeyInputsRecord, proto/neffd/v1/records.proto) with what cached
// entries were derived from. The compiler drop-in (neffcc) prints
// ExplainMiss's line on a miss under NEFFD_EXPLAIN=1; `neffctl why` prints
// the same for a key, and `neffctl drift` lists inputs cached under more than
// one key (FindDrift) — the cache's key-drift report, as ccache's debug mode
// and sccache's --show-stats explain misses of their own.
//
// Where the record lives: in model.done's metadata under kKeyInputsMetadata
// (so the daemon's index and ListEntries carry it) and as compile_flags.json
// in the entry directory; for a key that missed and is not (yet) cached, in
// MissRecordPath() on the host where it missed.
//
// Pure functions; thread-safe.
#ifndef NEFFD_CLIENT_EXPLAIN_H_
#define NEFFD_CLIENT_EXPLAIN_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/neffd/v1/records.pb.h"
#include "store/store.h"

namespace neffd {

// The metadata key (Publish metadata, model.done) holding the record's JSON
// is kKeyInputsMetadata (store/store.h): the store also writes that value
// into the entry directory as compile_flags.json.

// {local_dir}/neffcc/misses/{key}.json: the inputs of a key that missed on
// this host, written before it compiles.
std::string MissRecordPath(absl::string_view local_dir, absl::string_view key);

// A digest or key shortened for one-line messages, as git does:
// "3f2a0b1c9d8e…" (12 characters and an ellipsis); short ones unchanged.
std::string ShortHex(absl::string_view hex);

// Compact JSON (protobuf's JSON mapping, proto field names).
std::string KeyInputsToJson(const v1::KeyInputsRecord& record);
// InvalidArgument naming what is wrong for anything that is not a record.
absl::StatusOr<v1::KeyInputsRecord> KeyInputsFromJson(absl::string_view json);

// One cached entry and what its key was derived from.
struct CachedKey {
  std::string key;
  v1::KeyInputsRecord inputs;
};

// One line, no trailing newline, for a miss of `key` derived from `now`:
//   "miss 3f2a…: same input cached with flags differing: -O1 (cached) vs
//    -O3 (now)"
//   "miss 3f2a…: same input and flags cached with compiler version 2.18
//    (cached) vs 2.19 (now)"
//   "miss 3f2a…: no cached entry has the same input (sha256 ab12…, 812 bytes)"
// Of several cached entries with the same input, the one whose flags differ
// least is named.
std::string ExplainMiss(absl::string_view key, const v1::KeyInputsRecord& now,
                        const std::vector<CachedKey>& cached);

// Flags present in one record and not the other, each in its own order.
struct FlagDifference {
  std::vector<std::string> only_in_cached;
  std::vector<std::string> only_in_now;
};
FlagDifference DiffFlags(const v1::KeyInputsRecord& cached,
                         const v1::KeyInputsRecord& now);

// What differs between two records of the same input, each side named by
// its label: "flags differing: -O1 (cached) vs -O3 (now); compiler version
// 2.18 (cached) vs 2.19 (now)". Empty when flags, compiler version and
// platform target all agree. ExplainMiss's wording, for callers that compare
// other pairs (`neffctl why` on a cached key).
std::string DescribeDifference(const v1::KeyInputsRecord& a,
                               absl::string_view a_label,
                               const v1::KeyInputsRecord& b,
                               absl::string_view b_label);

// An input (by sha256) cached under more than one key.
struct Drift {
  std::string input_sha256;
  uint64_t input_size = 0;
  std::vector<CachedKey> keys;  // sorted by key
  // Flags not shared by every key's record, in first-seen order.
  std::vector<std::string> differing_flags;
  // Set when the keys' compiler versions or platform targets differ.
  bool versions_differ = false;
  bool targets_differ = false;
};
// Every input cached under two or more keys, ordered by input sha256.
std::vector<Drift> FindDrift(const std::vector<CachedKey>& cached);

}  // namespace neffd

#endif  // NEFFD_CLIENT_EXPLAIN_H_
