#include "store/layout.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace neffd {

absl::string_view ArtifactExtension(Namespace ns) {
  return ns == Namespace::kNeff ? ".neff" : ".hlo";
}

std::string ShardDir(absl::string_view key) {
  std::string first4(key.substr(0, 4));
  first4.resize(4, '_');
  for (char& c : first4) {
    if (c == '.') c = '_';
  }
  return absl::StrCat(first4.substr(0, 2), "/", first4.substr(2, 2));
}

std::string ArtifactRelPath(Namespace ns, absl::string_view key) {
  return absl::StrCat(ShardDir(key), "/", key, ArtifactExtension(ns));
}

std::string RecordsRelDir(absl::string_view key) {
  return absl::StrCat(ShardDir(key), "/", key, kRecordsSuffix);
}

ShardName ClassifyShardName(Namespace ns, absl::string_view shard,
                            absl::string_view name, std::string* key) {
  if (absl::StartsWith(name, ".tmp.")) return ShardName::kTorchNeuronTemp;
  absl::string_view stem = name;
  ShardName kind = ShardName::kOther;
  if (absl::ConsumeSuffix(&stem, ArtifactExtension(ns))) {
    kind = ShardName::kArtifact;
  } else if (absl::ConsumeSuffix(&stem, kRecordsSuffix)) {
    kind = ShardName::kRecords;
  }
  if (kind == ShardName::kOther || !ValidateToken("id.key", stem).ok() ||
      ShardDir(stem) != shard) {
    return ShardName::kOther;
  }
  *key = std::string(stem);
  return kind;
}

Judgement JudgeEntry(Namespace ns, absl::string_view key,
                     const ArtifactSeen& artifact, const v1::DoneRecord* done,
                     absl::string_view requested_version) {
  if (!artifact.exists) {
    return {done != nullptr ? Verdict::kCleared : Verdict::kMiss, ""};
  }
  const std::string name = absl::StrCat(key, ArtifactExtension(ns));
  if (!artifact.regular) {
    return {Verdict::kDamage, absl::StrCat(name, " is not a regular file")};
  }
  if (artifact.size == 0) return {Verdict::kMiss, ""};
  if (done == nullptr) return {Verdict::kAdopt, ""};
  if (!requested_version.empty() && !done->compiler_version().empty() &&
      done->compiler_version() != requested_version) {
    return {Verdict::kVersionMismatch, ""};
  }
  // A put replaces the artifact whole by a rename (TorchNeuron's and
  // neffd's alike): another inode is a new artifact to record, never
  // damage. TorchNeuron writes no artifact in place.
  if (done->artifact_inode() != artifact.inode) return {Verdict::kAdopt, ""};
  if (done->size() != artifact.size) {
    return {Verdict::kDamage,
            absl::StrCat(name, " is ", artifact.size,
                         " bytes; its record says ", done->size())};
  }
  return {Verdict::kVerify, ""};
}

}  // namespace neffd
