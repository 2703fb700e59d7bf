#include "client/daemon_channel.h"

#include "config/env.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace neffd {

std::string ResolveDaemonAddress(const std::string& address) {
  if (!address.empty()) return address;
  return config::EnvSnapshot::FromProcessEnvironment().GetString(
      "NEFFD_ADDRESS");
}

std::shared_ptr<grpc::Channel> ConnectToDaemon(const std::string& address) {
  grpc::ChannelArguments args;
  // Inline hlo entries may be up to the daemon's inline limit (16 MiB).
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  // A local daemon that restarts should be retried promptly.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(ResolveDaemonAddress(address),
                                   grpc::InsecureChannelCredentials(), args);
}

}  // namespace neffd
