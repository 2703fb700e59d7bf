#include "client/explain.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/util/json_util.h"

namespace neffd {
namespace {

std::string JoinOrNone(const std::vector<std::string>& flags) {
  return flags.empty() ? "(none)" : absl::StrJoin(flags, " ");
}

}  // namespace

std::string ShortHex(absl::string_view hex) {
  return hex.size() > 12 ? absl::StrCat(hex.substr(0, 12), "…")
                         : std::string(hex);
}

std::string MissRecordPath(absl::string_view local_dir, absl::string_view key) {
  return absl::StrCat(local_dir, "/neffcc/misses/", key, ".json");
}

std::string KeyInputsToJson(const v1::KeyInputsRecord& record) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string json;
  // A message of strings and integers always prints.
  (void)google::protobuf::util::MessageToJsonString(record, &json, options);
  return json;
}

absl::StatusOr<v1::KeyInputsRecord> KeyInputsFromJson(absl::string_view json) {
  v1::KeyInputsRecord record;
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = true;
  const auto status = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &record,
      options);
  if (!status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "key inputs record is not valid JSON: ", status.message().as_string()));
  }
  return record;
}

FlagDifference DiffFlags(const v1::KeyInputsRecord& cached,
                         const v1::KeyInputsRecord& now) {
  const std::multiset<std::string> in_cached(cached.flags().begin(),
                                             cached.flags().end());
  const std::multiset<std::string> in_now(now.flags().begin(),
                                          now.flags().end());
  FlagDifference diff;
  for (const std::string& flag : cached.flags()) {
    if (in_now.count(flag) == 0) diff.only_in_cached.push_back(flag);
  }
  for (const std::string& flag : now.flags()) {
    if (in_cached.count(flag) == 0) diff.only_in_now.push_back(flag);
  }
  return diff;
}

std::string DescribeDifference(const v1::KeyInputsRecord& a,
                               absl::string_view a_label,
                               const v1::KeyInputsRecord& b,
                               absl::string_view b_label) {
  std::vector<std::string> reasons;
  const FlagDifference diff = DiffFlags(a, b);
  if (!diff.only_in_cached.empty() || !diff.only_in_now.empty()) {
    reasons.push_back(absl::StrCat(
        "flags differing: ", JoinOrNone(diff.only_in_cached), " (", a_label,
        ") vs ", JoinOrNone(diff.only_in_now), " (", b_label, ")"));
  }
  if (a.compiler_version() != b.compiler_version()) {
    reasons.push_back(absl::StrCat("compiler version ", a.compiler_version(),
                                   " (", a_label, ") vs ", b.compiler_version(),
                                   " (", b_label, ")"));
  }
  if (a.platform_target() != b.platform_target()) {
    reasons.push_back(absl::StrCat("platform target ", a.platform_target(),
                                   " (", a_label, ") vs ", b.platform_target(),
                                   " (", b_label, ")"));
  }
  return absl::StrJoin(reasons, "; ");
}

std::string ExplainMiss(absl::string_view key, const v1::KeyInputsRecord& now,
                        const std::vector<CachedKey>& cached) {
  const std::string prefix = absl::StrCat("miss ", ShortHex(key), ": ");
  const CachedKey* closest = nullptr;
  size_t closest_distance = 0;
  for (const CachedKey& candidate : cached) {
    if (candidate.key == key ||
        candidate.inputs.input_sha256() != now.input_sha256()) {
      continue;
    }
    const FlagDifference diff = DiffFlags(candidate.inputs, now);
    size_t distance = diff.only_in_cached.size() + diff.only_in_now.size();
    if (candidate.inputs.compiler_version() != now.compiler_version()) {
      ++distance;
    }
    if (candidate.inputs.platform_target() != now.platform_target()) {
      ++distance;
    }
    if (closest == nullptr || distance < closest_distance) {
      closest = &candidate;
      closest_distance = distance;
    }
  }
  if (closest == nullptr) {
    return absl::StrCat(prefix, "no cached entry has the same input (sha256 ",
                        ShortHex(now.input_sha256()), ", ", now.input_size(),
                        " bytes)");
  }
  std::string difference =
      DescribeDifference(closest->inputs, "cached", now, "now");
  if (difference.empty()) {
    // Same recorded inputs, other key: the key derivation itself changed
    // (another neffd version) or the record is incomplete.
    difference = "identical recorded inputs (key derivation differs)";
  }
  return absl::StrCat(prefix, "same input cached as ", ShortHex(closest->key),
                      " with ", difference);
}

std::vector<Drift> FindDrift(const std::vector<CachedKey>& cached) {
  std::map<std::string, std::vector<CachedKey>> by_input;
  for (const CachedKey& entry : cached) {
    if (entry.inputs.input_sha256().empty()) continue;  // no record
    by_input[entry.inputs.input_sha256()].push_back(entry);
  }
  std::vector<Drift> drifts;
  for (auto& [sha256, keys] : by_input) {
    std::sort(
        keys.begin(), keys.end(),
        [](const CachedKey& a, const CachedKey& b) { return a.key < b.key; });
    keys.erase(std::unique(keys.begin(), keys.end(),
                           [](const CachedKey& a, const CachedKey& b) {
                             return a.key == b.key;
                           }),
               keys.end());
    if (keys.size() < 2) continue;
    Drift drift;
    drift.input_sha256 = sha256;
    drift.input_size = keys.front().inputs.input_size();
    std::map<std::string, size_t> holders;  // flag -> records holding it
    std::vector<std::string> seen_order;
    for (const CachedKey& entry : keys) {
      std::set<std::string> flags(entry.inputs.flags().begin(),
                                  entry.inputs.flags().end());
      for (const std::string& flag : entry.inputs.flags()) {
        if (holders.find(flag) == holders.end()) seen_order.push_back(flag);
      }
      for (const std::string& flag : flags) ++holders[flag];
      drift.versions_differ |= entry.inputs.compiler_version() !=
                               keys.front().inputs.compiler_version();
      drift.targets_differ |= entry.inputs.platform_target() !=
                              keys.front().inputs.platform_target();
    }
    for (const std::string& flag : seen_order) {
      if (holders[flag] != keys.size()) drift.differing_flags.push_back(flag);
    }
    drift.keys = std::move(keys);
    drifts.push_back(std::move(drift));
  }
  return drifts;
}

}  // namespace neffd
