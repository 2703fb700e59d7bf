// neffctl's S3 tier commands (docs/REMOTE.md): warm pulls a manifest's
// entries from S3 into the shared store and this host's tier; manifest
// writes the entries this host used, one "NS VERSION KEY" line each.
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "client/neffctl/ctl.h"

namespace neffd::ctl {
namespace {

// The entries of a manifest file; blank lines and '#' comments are skipped.
absl::StatusOr<std::vector<EntryKey>> ReadManifest(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return absl::InvalidArgumentError(
        absl::StrCat("--manifest ", path, ": cannot read it"));
  }
  std::vector<EntryKey> ids;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    absl::string_view text = absl::StripAsciiWhitespace(line);
    if (text.empty() || text[0] == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    absl::StatusOr<EntryKey> id =
        fields.size() == 3
            ? EntryKey::Parse(fields[0], fields[1], fields[2])
            : absl::InvalidArgumentError("expected NS VERSION KEY");
    if (!id.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ":", number, ": ", id.status().message()));
    }
    ids.push_back(*std::move(id));
  }
  return ids;
}

}  // namespace

int Ctl::Warm(const std::string& manifest) {
  absl::StatusOr<std::vector<EntryKey>> ids = ReadManifest(manifest);
  if (!ids.ok()) return Complain(kBadInput, ids.status().message());
  v1::WarmRequest request;
  for (const EntryKey& id : *ids) *request.add_ids() = id.ToProto();
  auto context = Context(absl::Hours(24));
  auto reader = operator_->Warm(context.get(), request);
  v1::WarmProgress progress, last;
  {
    Progress bar("warm");
    while (reader->Read(&progress)) {
      last = progress;
      bar.Update(
          progress.checked(), progress.total(),
          absl::StrFormat("fetched %d (%s) cached %d missing %d",
                          progress.fetched(), HumanBytes(progress.bytes()),
                          progress.cached(), progress.missing()));
    }
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return RpcFailure(status, admin_address_);
  if (json_) {
    PrintJson(last);
  } else {
    std::printf(
        "%llu entries: %llu fetched from S3 (%s), %llu cached already, %llu "
        "not in S3, %llu busy elsewhere\n",
        (unsigned long long)last.total(), (unsigned long long)last.fetched(),
        HumanBytes(last.bytes()).c_str(), (unsigned long long)last.cached(),
        (unsigned long long)last.missing(), (unsigned long long)last.busy());
  }
  return last.missing() + last.busy() == 0 ? kOk : kMiss;
}

int Ctl::Manifest(absl::Duration since) {
  v1::ManifestRequest request;
  request.set_since_seconds(absl::ToInt64Seconds(since));
  v1::ManifestResponse response;
  grpc::Status status =
      admin_->Manifest(Context(absl::Minutes(5)).get(), request, &response);
  if (!status.ok()) return RpcFailure(status, address_);
  if (json_) {
    PrintJson(response);
    return kOk;
  }
  for (const v1::EntryId& id : response.ids()) {
    std::printf("%s %s %s\n", id.namespace_().c_str(),
                id.compiler_version().c_str(), id.key().c_str());
  }
  return kOk;
}

}  // namespace neffd::ctl
