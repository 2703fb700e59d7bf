// proto/admin_only.h
//
// The CacheAdmin calls that change the cache, as neffd.proto marks them
// (`option (neffd.v1.admin_only) = true`): the one list the daemon's
// socket check, both binaries' --help and the docs' test read, so a new
// mutating call is marked once, in the .proto.
//
// Thread-safe (reads the generated descriptor pool).
#ifndef NEFFD_PROTO_ADMIN_ONLY_H_
#define NEFFD_PROTO_ADMIN_ONLY_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "proto/neffd/v1/neffd.pb.h"

namespace neffd {

// True if CacheAdmin's `method` (a short name, "Evict") is admin-only.
inline bool IsAdminOnly(absl::string_view method) {
  const google::protobuf::MethodDescriptor* found =
      v1::EvictRequest::descriptor()
          ->file()
          ->FindServiceByName("CacheAdmin")
          ->FindMethodByName(std::string(method));
  return found != nullptr && found->options().GetExtension(v1::admin_only);
}

// The admin-only calls in the order neffd.proto declares them.
inline std::vector<std::string> AdminOnlyMethods() {
  const google::protobuf::ServiceDescriptor* service =
      v1::EvictRequest::descriptor()->file()->FindServiceByName("CacheAdmin");
  std::vector<std::string> methods;
  for (int i = 0; i < service->method_count(); ++i) {
    if (service->method(i)->options().GetExtension(v1::admin_only)) {
      methods.push_back(service->method(i)->name());
    }
  }
  return methods;
}

}  // namespace neffd

#endif  // NEFFD_PROTO_ADMIN_ONLY_H_
