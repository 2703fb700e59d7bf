#include "daemon/server/server_options.h"

#include <memory>
#include <vector>

namespace neffd {

void ConfigureServer(grpc::ServerBuilder& builder, uint64_t max_receive_bytes,
                     CallTracker* calls) {
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_receive_bytes));
  std::vector<
      std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
      interceptors;
  interceptors.push_back(calls->NewInterceptorFactory());
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
}

}  // namespace neffd
