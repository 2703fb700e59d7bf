// neffctl's key-input reports: why (what a key was derived from, against
// the cached keys of the same input) and drift (inputs cached under more
// than one key). Both read the records neffcc leaves in each entry's
// metadata (client/explain.h); entries without one take no part.
#include <cstdio>
#include <map>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/explain.h"
#include "client/neffctl/ctl.h"
#include "config/env.h"
#include "proto/neffd/v1/key_reports.pb.h"
#include "store/file_util.h"

namespace neffd::ctl {
namespace {

// A miss record is one small JSON object; anything larger is not one.
constexpr size_t kMaxRecordBytes = 1 << 20;

// The entry's record, if it was published with a valid one.
std::optional<v1::KeyInputsRecord> RecordOf(const v1::Entry& entry) {
  auto it = entry.metadata().find(kKeyInputsMetadata);
  if (it == entry.metadata().end()) return std::nullopt;
  absl::StatusOr<v1::KeyInputsRecord> record = KeyInputsFromJson(it->second);
  if (!record.ok() || record->input_sha256().empty()) return std::nullopt;
  return *std::move(record);
}

std::string InputsText(const v1::KeyInputsRecord& r) {
  return absl::StrCat(
      "input sha256 ", r.input_sha256(), " (", r.input_size(),
      " bytes), compiler ", r.compiler_version(), ", target ",
      r.platform_target(), ", flags ",
      r.flags().empty() ? "(none)" : absl::StrJoin(r.flags(), " "));
}

struct Recorded {
  v1::EntryId id;
  v1::KeyInputsRecord inputs;
};

std::vector<CachedKey> AsCachedKeys(const std::vector<Recorded>& recorded) {
  std::vector<CachedKey> out;
  out.reserve(recorded.size());
  for (const Recorded& r : recorded) out.push_back({r.id.key(), r.inputs});
  return out;
}

// Fills the report's same-input keys and its first line. A cached key is
// compared as "this key" with the "other" keys of its input; a key that
// missed as "now" with the "cached" ones, in NEFFD_EXPLAIN's words.
void CompareWithSameInput(const std::vector<Recorded>& recorded,
                          v1::WhyReport* report) {
  const v1::KeyInputsRecord& now = report->inputs();
  const std::string& key = report->id().key();
  const bool cached = report->cached();
  for (const Recorded& r : recorded) {
    if (r.id.key() == key || r.inputs.input_sha256() != now.input_sha256()) {
      continue;
    }
    v1::SameInputKey* same = report->add_same_input();
    *same->mutable_id() = r.id;
    *same->mutable_inputs() = r.inputs;
    const FlagDifference diff = DiffFlags(r.inputs, now);
    for (const std::string& f : diff.only_in_cached) {
      same->add_flags_only_in_other(f);
    }
    for (const std::string& f : diff.only_in_now) {
      same->add_flags_only_in_this(f);
    }
    same->set_difference(DescribeDifference(r.inputs,
                                            cached ? "other" : "cached", now,
                                            cached ? "this key" : "now"));
  }
  const int n = report->same_input_size();
  report->set_explanation(
      cached ? absl::StrCat(IdText(report->id()), " is cached; ", n,
                            " other cached key", n == 1 ? " has" : "s have",
                            " the same input")
             : ExplainMiss(key, now, AsCachedKeys(recorded)));
}

void PrintWhy(const v1::WhyReport& report) {
  std::printf("%s\n", report.explanation().c_str());
  std::printf("inputs (from %s): %s\n", report.record_source().c_str(),
              InputsText(report.inputs()).c_str());
  if (report.same_input_size() == 0) return;
  std::vector<std::vector<std::string>> rows = {{"SAME INPUT", "DIFFERENCE"}};
  for (const v1::SameInputKey& same : report.same_input()) {
    rows.push_back({IdText(same.id()), same.difference().empty()
                                           ? "identical recorded inputs"
                                           : same.difference()});
  }
  PrintTable(rows);
}

}  // namespace

int Ctl::ForEachListed(const v1::ListEntriesRequest& filter,
                       const std::function<void(const v1::EntryInfo&)>& each) {
  v1::ListEntriesRequest request = filter;
  request.set_sort_by(v1::ListEntriesRequest::KEY);
  request.set_page_size(kListPageSize);
  for (;;) {
    v1::ListEntriesResponse page;
    grpc::Status status =
        admin_->ListEntries(Context(absl::Minutes(5)).get(), request, &page);
    if (!status.ok()) return RpcFailure(status, address_);
    for (const v1::EntryInfo& info : page.entries()) each(info);
    if (page.next_page_token().empty()) return kOk;
    request.set_page_token(page.next_page_token());
  }
}

int Ctl::Why(const std::string& ns, const std::string& key,
             const std::string& compiler_version) {
  if (ns != NamespaceName(Namespace::kNeff) &&
      ns != NamespaceName(Namespace::kHlo)) {
    return Complain(kBadInput,
                    absl::StrCat("namespace '", ns, "': expected neff or hlo"));
  }
  absl::Status valid = ValidateToken("key", key);
  if (valid.ok() && !compiler_version.empty()) {
    valid = ValidateToken("--compiler_version", compiler_version);
  }
  if (!valid.ok()) return Complain(kBadInput, valid.message());

  // Every version: a compiler upgrade is one of the answers.
  v1::ListEntriesRequest filter;
  filter.set_namespace_(ns);
  std::vector<Recorded> recorded;
  std::vector<v1::EntryInfo> own;  // KEY's entries, by version
  int rc = ForEachListed(filter, [&](const v1::EntryInfo& info) {
    if (info.id().key() == key &&
        (compiler_version.empty() ||
         info.id().compiler_version() == compiler_version)) {
      own.push_back(info);
    }
    if (std::optional<v1::KeyInputsRecord> r = RecordOf(info.entry())) {
      recorded.push_back({info.id(), *std::move(r)});
    }
  });
  if (rc != kOk) return rc;

  if (!compiler_version.empty() && own.empty()) {
    // Published by another host on the shared store, not yet in this
    // host's index.
    v1::ShowEntryRequest request;
    request.mutable_id()->set_namespace_(ns);
    request.mutable_id()->set_compiler_version(compiler_version);
    request.mutable_id()->set_key(key);
    v1::EntryInfo info;
    grpc::Status status =
        admin_->ShowEntry(Context(absl::Minutes(1)).get(), request, &info);
    if (status.ok() && info.cached()) {
      own.push_back(info);
    } else if (!status.ok() &&
               status.error_code() != grpc::StatusCode::NOT_FOUND) {
      return RpcFailure(status, address_);
    }
  }
  if (own.size() > 1) {
    std::vector<std::string> versions;
    for (const v1::EntryInfo& info : own) {
      versions.push_back(info.id().compiler_version());
    }
    return Complain(kBadInput, absl::StrCat(ns, "/", key,
                                            " is cached under compiler "
                                            "versions ",
                                            absl::StrJoin(versions, ", "),
                                            "; give --compiler_version"));
  }

  v1::WhyReport report;
  report.mutable_id()->set_namespace_(ns);
  report.mutable_id()->set_compiler_version(compiler_version);
  report.mutable_id()->set_key(key);
  if (!own.empty()) {
    *report.mutable_id() = own.front().id();
    report.set_cached(true);
    if (std::optional<v1::KeyInputsRecord> r = RecordOf(own.front().entry())) {
      *report.mutable_inputs() = *std::move(r);
      report.set_record_source("entry metadata");
    }
  }
  const std::string miss_record =
      MissRecordPath(config::EnvSnapshot::FromProcessEnvironment().GetString(
                         "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR"),
                     key);
  if (report.record_source().empty()) {
    absl::StatusOr<std::string> json =
        ReadSmallFile(miss_record, kMaxRecordBytes);
    absl::StatusOr<v1::KeyInputsRecord> r =
        json.ok() ? KeyInputsFromJson(*json) : json.status();
    if (!r.ok()) {
      return Complain(
          kMiss,
          absl::StrCat("no record of the inputs of key ", key, ": ",
                       report.cached() ? "cached without a key_inputs record"
                                       : "not cached here",
                       ", and no miss record (", r.status().message(), ")"));
    }
    *report.mutable_inputs() = *std::move(r);
    report.set_record_source(miss_record);
  }

  CompareWithSameInput(recorded, &report);
  if (json_) {
    PrintJson(report);
  } else {
    PrintWhy(report);
  }
  return kOk;
}

int Ctl::Drift(const std::string& ns, const std::string& compiler_version) {
  v1::ListEntriesRequest filter;
  filter.set_namespace_(ns);
  filter.set_compiler_version(compiler_version);
  std::vector<Recorded> recorded;
  v1::DriftReport report;
  int rc = ForEachListed(filter, [&](const v1::EntryInfo& info) {
    if (std::optional<v1::KeyInputsRecord> r = RecordOf(info.entry())) {
      recorded.push_back({info.id(), *std::move(r)});
    } else {
      report.set_unrecorded_entries(report.unrecorded_entries() + 1);
    }
  });
  if (rc != kOk) return rc;
  report.set_recorded_entries(recorded.size());

  std::map<std::string, v1::EntryId> ids;  // FindDrift speaks keys
  for (const Recorded& r : recorded) ids.emplace(r.id.key(), r.id);
  for (const neffd::Drift& drift : FindDrift(AsCachedKeys(recorded))) {
    v1::DriftInput* input = report.add_inputs();
    input->set_input_sha256(drift.input_sha256);
    input->set_input_size(drift.input_size);
    for (const std::string& f : drift.differing_flags) {
      input->add_differing_flags(f);
    }
    input->set_versions_differ(drift.versions_differ);
    input->set_targets_differ(drift.targets_differ);
    const std::set<std::string> differing(drift.differing_flags.begin(),
                                          drift.differing_flags.end());
    for (const CachedKey& cached : drift.keys) {
      v1::DriftKey* key = input->add_keys();
      *key->mutable_id() = ids[cached.key];
      *key->mutable_inputs() = cached.inputs;
      for (const std::string& f : cached.inputs.flags()) {
        if (differing.count(f) > 0) key->add_differing_flags(f);
      }
    }
  }

  if (json_) {
    PrintJson(report);
    return kOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"INPUT", "SIZE", "ENTRY", "TARGET", "DIFFERING FLAGS"}};
  for (const v1::DriftInput& input : report.inputs()) {
    bool first = true;
    for (const v1::DriftKey& key : input.keys()) {
      rows.push_back({first ? ShortHex(input.input_sha256()) : "",
                      first ? HumanBytes(input.input_size()) : "",
                      IdText(key.id()), key.inputs().platform_target(),
                      key.differing_flags().empty()
                          ? "-"
                          : absl::StrJoin(key.differing_flags(), " ")});
      first = false;
    }
  }
  if (report.inputs_size() > 0) PrintTable(rows, {1});
  std::printf(
      "%d input%s cached under more than one key (%llu entries with key-input "
      "records, %llu without)\n",
      report.inputs_size(), report.inputs_size() == 1 ? "" : "s",
      static_cast<unsigned long long>(report.recorded_entries()),
      static_cast<unsigned long long>(report.unrecorded_entries()));
  return kOk;
}

}  // namespace neffd::ctl
