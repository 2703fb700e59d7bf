#include "store/layout.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace neffd {
namespace {

bool IsLowerHex(absl::string_view s) {
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

absl::string_view Extension(Namespace ns) {
  return ns == Namespace::kNeff ? ".neff" : ".hlo";
}

}  // namespace

absl::Status ValidateLayoutKey(Namespace ns, absl::string_view key) {
  if (absl::Status s = ValidateToken("id.key", key); !s.ok()) return s;
  if (ns == Namespace::kNeff) {
    if ((key.size() == 32 || key.size() == 64) && IsLowerHex(key)) {
      return absl::OkStatus();
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "id.key: a NEFF key is 32 (TorchNeuron) or 64 (neffd) lowercase hex "
        "digits; got ",
        key.size(), " characters"));
  }
  if (key.size() < 4 || absl::StrContains(key.substr(0, 4), ".")) {
    return absl::InvalidArgumentError(
        "id.key: an HLO key needs at least 4 characters, none of the first "
        "four a '.'");
  }
  return absl::OkStatus();
}

std::string ShardDir(absl::string_view key) {
  return absl::StrCat(key.substr(0, 2), "/", key.substr(2, 2));
}

std::string ArtifactRelPath(Namespace ns, absl::string_view key) {
  return absl::StrCat(ShardDir(key), "/", key, Extension(ns));
}

std::string RecordsRelDir(absl::string_view key) {
  return absl::StrCat(ShardDir(key), "/", key, kRecordsSuffix);
}

ShardName ClassifyShardName(Namespace ns, absl::string_view name,
                            std::string* key) {
  if (absl::StartsWith(name, ".tmp.")) return ShardName::kTorchNeuronTemp;
  absl::string_view stem = name;
  ShardName kind = ShardName::kOther;
  if (absl::ConsumeSuffix(&stem, Extension(ns))) {
    kind = ShardName::kArtifact;
  } else if (absl::ConsumeSuffix(&stem, kRecordsSuffix)) {
    kind = ShardName::kRecords;
  }
  if (kind == ShardName::kOther || !ValidateLayoutKey(ns, stem).ok()) {
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
  const std::string name = absl::StrCat(key, Extension(ns));
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
  // neffd's alike): a new inode is a new artifact to record, never damage.
  if (done->artifact_inode() != artifact.inode) return {Verdict::kAdopt, ""};
  if (done->size() != artifact.size) {
    return {Verdict::kDamage,
            absl::StrCat(name, " is ", artifact.size,
                         " bytes; its record says ", done->size())};
  }
  return {Verdict::kVerify, ""};
}

}  // namespace neffd
