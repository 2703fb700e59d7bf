#include "daemon/server/admin_service.h"

#include <limits.h>
#include <stdlib.h>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "daemon/log/log.h"
#include "daemon/server/grpc_status.h"
#include "proto/admin_only.h"

namespace neffd {
namespace {

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) != nullptr ? resolved : "";
}

}  // namespace

absl::StatusOr<Namespace> ParseNamespaceField(absl::string_view field,
                                              absl::string_view value) {
  if (value.empty() || value == "neff") return Namespace::kNeff;
  if (value == "hlo") return Namespace::kHlo;
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": unknown namespace '", absl::CHexEscape(value),
                   "'; expected 'neff' or 'hlo'"));
}

grpc::Status CacheAdminService::CheckMutationAllowed(
    const grpc::ServerContext* context, absl::string_view method) const {
  // neffd.proto's admin_only option is the one list of such calls.
  if (!IsAdminOnly(method)) return grpc::Status::OK;
  const std::optional<PeerCredentials> peer =
      options_.peers != nullptr ? options_.peers->Find(context->peer())
                                : std::nullopt;
  if (options_.mutations_only_on.empty()) {
    log::Warning("admin_call",
                 {{"call", method}, {"peer", DescribePeer(peer)}});
    return grpc::Status::OK;
  }
  log::Info("admin_refused", {{"call", method}, {"peer", DescribePeer(peer)}});
  return MakeGrpcStatus(
      grpc::StatusCode::PERMISSION_DENIED,
      absl::StrCat(method,
                   " changes the cache and is served only on the admin "
                   "socket ",
                   options_.mutations_only_on,
                   " (neffctl --admin_address), not on the ranks' socket"));
}

grpc::Status CacheAdminService::Evict(grpc::ServerContext* context,
                                      const v1::EvictRequest* request,
                                      v1::EvictResponse* response) {
  if (grpc::Status s = CheckMutationAllowed(context, "Evict"); !s.ok())
    return s;
  absl::StatusOr<EntryKey> id = EntryKey::Parse(request->id());
  if (!id.ok()) return ToGrpcStatus(id.status());
  absl::StatusOr<v1::EvictResponse> evicted =
      maintenance_->Evict(*id, request->failure_only());
  if (!evicted.ok()) return ToGrpcStatus(evicted.status());
  *response = *std::move(evicted);
  return grpc::Status::OK;
}

grpc::Status CacheAdminService::Verify(
    grpc::ServerContext* context, const v1::VerifyRequest* request,
    grpc::ServerWriter<v1::VerifyProgress>* writer) {
  absl::StatusOr<Namespace> ns =
      ParseNamespaceField("namespace", request->namespace_());
  if (!ns.ok()) return ToGrpcStatus(ns.status());
  return ToGrpcStatus(maintenance_->Verify(
      *ns, request->all(), [&](const v1::VerifyProgress& progress) {
        if (!context->IsCancelled()) writer->Write(progress);
      }));
}

grpc::Status CacheAdminService::Gc(grpc::ServerContext* context,
                                   const v1::GcRequest* request,
                                   v1::GcResponse* response) {
  if (grpc::Status s = CheckMutationAllowed(context, "Gc"); !s.ok()) return s;
  absl::StatusOr<Namespace> ns =
      ParseNamespaceField("namespace", request->namespace_());
  if (!ns.ok()) return ToGrpcStatus(ns.status());
  if (request->older_than_seconds() < 0) {
    return ToGrpcStatus(
        absl::InvalidArgumentError("older_than_seconds: must not be negative"));
  }
  // Without a size or age goal no entry is removed: the run only sweeps
  // the store's leftovers past their bounds (Maintenance::Gc).
  absl::StatusOr<v1::GcResponse> collected =
      options_.gc ? options_.gc(*ns, *request)
                  : maintenance_->Gc(*ns, *request);
  if (!collected.ok()) return ToGrpcStatus(collected.status());
  *response = *std::move(collected);
  return grpc::Status::OK;
}

grpc::Status CacheAdminService::Import(
    grpc::ServerContext* context, const v1::ImportRequest* request,
    grpc::ServerWriter<v1::ImportProgress>* writer) {
  if (grpc::Status s = CheckMutationAllowed(context, "Import"); !s.ok())
    return s;
  const std::string dir = RealPath(request->dir());
  std::optional<Namespace> ns;
  for (Namespace candidate : {Namespace::kNeff, Namespace::kHlo}) {
    if (!dir.empty() && dir == RealPath(catalog_->StoreFor(candidate).root())) {
      ns = candidate;
    }
  }
  if (!ns.has_value()) {
    return ToGrpcStatus(absl::InvalidArgumentError(absl::StrCat(
        "dir: '", absl::CHexEscape(request->dir()),
        "' is not this daemon's cache dir (",
        catalog_->StoreFor(Namespace::kNeff).root(), " or ",
        catalog_->StoreFor(Namespace::kHlo).root(),
        "); to adopt another cache, start neffd with --cache_dir pointing "
        "at it")));
  }
  return ToGrpcStatus(
      maintenance_->Import(*ns, request->clear_stale_locks(),
                           [&](const v1::ImportProgress& progress) {
                             if (!context->IsCancelled())
                               writer->Write(progress);
                           }));
}

}  // namespace neffd
