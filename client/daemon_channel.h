// client/daemon_channel.h
//
// How every client reaches neffd: the address comes from the caller, else
// NEFFD_ADDRESS through the config registry, else the default socket
// unix:/run/neffd/neffd.sock. Calls fail fast (no wait-for-ready), so an
// absent daemon shows up as UNAVAILABLE at once and callers can fall back.
//
// Thread-safe.
#ifndef NEFFD_CLIENT_DAEMON_CHANNEL_H_
#define NEFFD_CLIENT_DAEMON_CHANNEL_H_

#include <memory>
#include <string>

#include "grpcpp/channel.h"

namespace neffd {

// `address` if non-empty, else $NEFFD_ADDRESS, else the default socket.
std::string ResolveDaemonAddress(const std::string& address);

// A channel to the daemon at ResolveDaemonAddress(address).
std::shared_ptr<grpc::Channel> ConnectToDaemon(const std::string& address);

}  // namespace neffd

#endif  // NEFFD_CLIENT_DAEMON_CHANNEL_H_
