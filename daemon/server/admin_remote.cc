// CacheAdmin's S3 tier calls: Warm (neffctl warm) and Manifest (neffctl
// manifest). Validation here; the work is RemoteTier::Warm's and the index's.
#include <algorithm>

#include "absl/strings/str_cat.h"
#include "daemon/server/admin_service.h"
#include "daemon/server/grpc_status.h"

namespace neffd {
namespace {

// A manifest line per entry; more than this is not a job's working set.
constexpr int kMaxWarmEntries = 1 << 20;

}  // namespace

grpc::Status CacheAdminService::Warm(
    grpc::ServerContext* context, const v1::WarmRequest* request,
    grpc::ServerWriter<v1::WarmProgress>* writer) {
  if (grpc::Status s = CheckMutationAllowed(context, "Warm"); !s.ok()) {
    return s;
  }
  if (options_.remote == nullptr) {
    return ToGrpcStatus(absl::FailedPreconditionError(
        "warm pulls from the S3 tier; start neffd with --remote=s3://BUCKET/"
        "PREFIX"));
  }
  if (request->ids_size() > kMaxWarmEntries) {
    return ToGrpcStatus(absl::InvalidArgumentError(
        absl::StrCat("ids: ", request->ids_size(), " entries; at most ",
                     kMaxWarmEntries, " per call")));
  }
  std::vector<EntryKey> ids;
  ids.reserve(request->ids_size());
  for (int i = 0; i < request->ids_size(); ++i) {
    absl::StatusOr<EntryKey> id = EntryKey::Parse(request->ids(i));
    if (!id.ok()) {
      return ToGrpcStatus(absl::InvalidArgumentError(
          absl::StrCat("ids[", i, "]: ", id.status().message())));
    }
    ids.push_back(*std::move(id));
  }
  options_.remote->Warm(ids, [&](const v1::WarmProgress& progress) {
    if (!context->IsCancelled()) writer->Write(progress);
  });
  return grpc::Status::OK;
}

grpc::Status CacheAdminService::Manifest(grpc::ServerContext*,
                                         const v1::ManifestRequest* request,
                                         v1::ManifestResponse* response) {
  if (request->since_seconds() < 0) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "since_seconds: ", request->since_seconds(), " must not be negative")));
  }
  // Access times are kept in memory between flushes: write them first so
  // the entries served in the last seconds are listed too.
  (void)catalog_->FlushAccessTimes();
  const absl::Time since =
      request->since_seconds() == 0
          ? absl::InfinitePast()
          : options_.env->Now() - absl::Seconds(request->since_seconds());
  catalog_->index().ForEach([&](const EntryKey& id,
                                const v1::IndexRecord& record) {
    // The index holds only entries this host used: looked up, published
    // or fetched here; the latest of those uses counts.
    const absl::Time used =
        std::max(catalog_->LastServed(id, record),
                 absl::FromUnixMillis(record.entry().publish_time_unix_ms()));
    if (used >= since) {
      *response->add_ids() = id.ToProto();
    }
    return true;
  });
  return grpc::Status::OK;
}

}  // namespace neffd
