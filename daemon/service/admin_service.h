// daemon/service/admin_service.h
//
// CacheAdminService implements neffd.v1.CacheAdmin (the operator commands
// behind neffctl) over Maintenance. Like CompileCacheService it validates
// every field first and names it in INVALID_ARGUMENT messages; Import accepts
// only the daemon's own cache roots, so no request makes the daemon read or
// write elsewhere.
//
// Thread-safe.
#ifndef NEFFD_DAEMON_SERVICE_ADMIN_SERVICE_H_
#define NEFFD_DAEMON_SERVICE_ADMIN_SERVICE_H_

#include "daemon/service/maintenance.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"

namespace neffd {

class CacheAdminService final : public v1::CacheAdmin::Service {
 public:
  CacheAdminService(Maintenance* maintenance, Catalog* catalog)
      : maintenance_(maintenance), catalog_(catalog) {}

  grpc::Status Evict(grpc::ServerContext* context,
                     const v1::EvictRequest* request,
                     v1::EvictResponse* response) override;
  grpc::Status Verify(grpc::ServerContext* context,
                      const v1::VerifyRequest* request,
                      grpc::ServerWriter<v1::VerifyProgress>* writer) override;
  grpc::Status Gc(grpc::ServerContext* context, const v1::GcRequest* request,
                  v1::GcResponse* response) override;
  grpc::Status Import(grpc::ServerContext* context,
                      const v1::ImportRequest* request,
                      grpc::ServerWriter<v1::ImportProgress>* writer) override;

 private:
  Maintenance* const maintenance_;
  Catalog* const catalog_;
};

// The namespace named by a request field ("" means neff).
absl::StatusOr<Namespace> ParseNamespaceField(absl::string_view field,
                                              absl::string_view value);

}  // namespace neffd

#endif  // NEFFD_DAEMON_SERVICE_ADMIN_SERVICE_H_
