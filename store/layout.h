// store/layout.h
//
// TorchNeuron's cache layout (the spec page "How an unmodified TorchNeuron
// rank uses the NEFF cache", "Layout and key"; docs/ARCHITECTURE.md,
// "On-disk layout"): the one layout of both stores, so unmodified ranks and
// neffd share one cache.
//
//   {root}/{k0k1}/{k2k3}/{key}.neff      the artifact (hlo store: {key}.hlo),
//                                        TorchNeuron's own file: an unmodified
//                                        rank reads and writes it
//   {root}/{k0k1}/{k2k3}/.tmp.*          TorchNeuron's temp files (mkstemp)
//   {root}/{k0k1}/{k2k3}/.{key}.neff.tmp.*  neffd's temp files
//   {root}/{k0k1}/{k2k3}/{key}.neffd/    neffd's records of the entry:
//       model.done                       DoneRecord (size, sha256, producer,
//                                        compiler version, artifact inode);
//                                        written last
//       model.log                        a recorded failure (retry-after)
//       compile_flags.json               key inputs
//       neffd.lease                      the cross-host lease
//   {root}/.neffd/, quarantine/, .trash/ store-wide records and set-asides
//
// Why these names: TorchNeuron's clear removes every regular file whose name
// ends in ".neff" and then empty shard directories; libneuronxla's cleanups
// remove "*.lock" and its neuronxcc-*/MODULE_* trees. "{key}.neffd" ends in
// "neffd", holds no "*.neff" or "*.lock", and keeps its shard directory
// non-empty, so a clear removes exactly the artifacts: a cleared entry is a
// record without an artifact (a miss; gc removes the record), never damage.
//
// Keys: the file name is the key. TorchNeuron's (32 lowercase hex digits,
// client/torchneuron_key.h) and neffd's (64, client/key.h) are sharded by
// their first four characters exactly as TorchNeuron shards them. Any other
// EntryKey token (tests, HLO names such as "aten.add") is sharded by its
// first four characters with '.' read as '_' and padded with '_', so no
// shard directory is "." or "..".
//
// Thread-safe and pure.
#ifndef NEFFD_STORE_LAYOUT_H_
#define NEFFD_STORE_LAYOUT_H_

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "proto/neffd/v1/records.pb.h"
#include "store/entry_id.h"

namespace neffd {

// The directory name suffix of an entry's records ("{key}.neffd").
inline constexpr absl::string_view kRecordsSuffix = ".neffd";
// Store-wide records directory under the root.
inline constexpr absl::string_view kStoreRecordsDir = ".neffd";

// "{k0k1}/{k2k3}": the shard directories of a valid key, under the root.
std::string ShardDir(absl::string_view key);
// "{k0k1}/{k2k3}/{key}.neff" (or ".hlo"), relative to the root.
std::string ArtifactRelPath(Namespace ns, absl::string_view key);
// "{k0k1}/{k2k3}/{key}.neffd", relative to the root.
std::string RecordsRelDir(absl::string_view key);

// What a name in a shard directory is: TorchNeuron's or neffd's, or neither
// (anything else, left alone).
enum class ShardName { kArtifact, kRecords, kTorchNeuronTemp, kOther };
// Classifies `name` found in shard directory `shard` ("{k0k1}/{k2k3}") of
// store `ns`; sets *key for an artifact or records name whose key belongs in
// that shard.
ShardName ClassifyShardName(Namespace ns, absl::string_view shard,
                            absl::string_view name, std::string* key);
// The artifact's extension in store `ns`: ".neff" or ".hlo".
absl::string_view ArtifactExtension(Namespace ns);

// What one lstat of the artifact showed.
struct ArtifactSeen {
  bool exists = false;
  bool regular = false;
  uint64_t size = 0;
  ino_t inode = 0;
};

enum class Verdict {
  kMiss,             // nothing there, or an empty file (as for TorchNeuron)
  kCleared,          // records without an artifact: a clear, not damage;
                     // a miss whose records gc removes
  kVersionMismatch,  // recorded for another compiler version: a miss
  kAdopt,            // an artifact no record describes (an unmodified
                     // rank's put, or a replaced one: another inode):
                     // hash, record, serve it
  kVerify,           // the recorded file: check sha256 (once per file
                     // identity)
  kDamage,           // quarantine, with `reason`
};

struct Judgement {
  Verdict verdict;
  std::string reason;  // kDamage only
};

// What a lookup of `key` (store `ns`) for `requested_version` makes of what
// it saw: the artifact and its done record (null: none). Either version
// empty matches any (a TorchNeuron key commits to its compiler
// configuration; neffctl may omit the version).
Judgement JudgeEntry(Namespace ns, absl::string_view key,
                     const ArtifactSeen& artifact, const v1::DoneRecord* done,
                     absl::string_view requested_version);

}  // namespace neffd

#endif  // NEFFD_STORE_LAYOUT_H_
