#include "daemon/runtime/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"

namespace neffd {

bool NotifySystemd(absl::string_view state) {
  const char* name = std::getenv("NOTIFY_SOCKET");
  if (name == nullptr) return false;
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  const size_t length = std::strlen(name);
  if ((name[0] != '/' && name[0] != '@') || length < 2 ||
      length > sizeof(address.sun_path)) {
    return false;
  }
  std::memcpy(address.sun_path, name, length);
  // An abstract socket's name starts with a NUL and is not NUL-terminated.
  if (name[0] == '@') address.sun_path[0] = '\0';
  const socklen_t address_length = static_cast<socklen_t>(
      offsetof(sockaddr_un, sun_path) + length + (name[0] == '/' ? 1 : 0));
  const int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  const ssize_t sent =
      sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
             reinterpret_cast<const sockaddr*>(&address), address_length);
  close(fd);
  return sent == static_cast<ssize_t>(state.size());
}

absl::Duration SystemdWatchdogInterval() {
  const char* usec_text = std::getenv("WATCHDOG_USEC");
  uint64_t usec = 0;
  if (usec_text == nullptr || !absl::SimpleAtoi(usec_text, &usec) ||
      usec == 0) {
    return absl::ZeroDuration();
  }
  // Set for the main process only: a child that inherited it must not ping.
  if (const char* pid_text = std::getenv("WATCHDOG_PID"); pid_text != nullptr) {
    int64_t pid = 0;
    if (!absl::SimpleAtoi(pid_text, &pid) || pid != getpid()) {
      return absl::ZeroDuration();
    }
  }
  return absl::Microseconds(usec);
}

}  // namespace neffd
