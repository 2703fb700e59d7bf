#include "daemon/service/server_options.h"

namespace neffd {

void ConfigureServer(grpc::ServerBuilder& builder, uint64_t max_receive_bytes) {
  builder.SetMaxReceiveMessageSize(static_cast<int>(max_receive_bytes));
}

}  // namespace neffd
