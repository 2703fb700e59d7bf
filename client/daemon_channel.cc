#include "client/daemon_channel.h"

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "config/env.h"
#include "grpc/support/time.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/support/channel_arguments.h"
#include "store/file_util.h"

namespace neffd {

std::string ResolveDaemonAddress(const std::string& address) {
  if (!address.empty()) return address;
  return config::EnvSnapshot::FromProcessEnvironment().GetString(
      "NEFFD_ADDRESS");
}

std::string ResolveAdminAddress(const std::string& address) {
  if (!address.empty()) return address;
  return config::EnvSnapshot::FromProcessEnvironment().GetString(
      "NEFFD_ADMIN_ADDRESS");
}

absl::Status CheckTlsFiles(const ClientTls& tls) {
  const std::pair<absl::string_view, const std::string*> files[] = {
      {"tls_cert", &tls.cert}, {"tls_key", &tls.key}, {"tls_ca", &tls.ca}};
  for (const auto& [option, path] : files) {
    if (path->empty()) continue;
    std::string content;
    if (absl::Status s = ReadOptionFiles({{option, path, &content}}); !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> CredentialsFor(
    const ClientTls& tls) {
  if (!tls.any()) return grpc::InsecureChannelCredentials();
  if (tls.cert.empty() || tls.key.empty() || tls.ca.empty()) {
    return absl::InvalidArgumentError(
        "--tls_cert, --tls_key and --tls_ca go together (mutual TLS); give "
        "all three or none");
  }
  grpc::SslCredentialsOptions ssl;
  if (absl::Status s =
          ReadOptionFiles({{"--tls_cert", &tls.cert, &ssl.pem_cert_chain},
                           {"--tls_key", &tls.key, &ssl.pem_private_key},
                           {"--tls_ca", &tls.ca, &ssl.pem_root_certs}});
      !s.ok()) {
    return s;
  }
  return grpc::SslCredentials(ssl);
}

std::shared_ptr<grpc::Channel> ConnectToDaemon(
    const std::string& address,
    std::shared_ptr<grpc::ChannelCredentials> credentials) {
  const std::string target = ResolveDaemonAddress(address);
  if (credentials == nullptr || absl::StartsWith(target, "unix:")) {
    credentials = grpc::InsecureChannelCredentials();
  }
  grpc::ChannelArguments args;
  // Inline hlo entries may be up to the daemon's inline limit (16 MiB).
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  // A local daemon that restarts should be retried promptly.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  return grpc::CreateCustomChannel(target, credentials, args);
}

}  // namespace neffd
