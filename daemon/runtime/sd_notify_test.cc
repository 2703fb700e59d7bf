#include "daemon/runtime/sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace neffd {
namespace {

// An abstract datagram socket standing in for systemd's NOTIFY_SOCKET.
class NotifySocket {
 public:
  NotifySocket() : name_(absl::StrCat("neffd-sd-notify-test-", getpid())) {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path + 1, name_.data(), name_.size());
    const socklen_t length = static_cast<socklen_t>(
        offsetof(sockaddr_un, sun_path) + 1 + name_.size());
    bound_ = bind(fd_, reinterpret_cast<sockaddr*>(&address), length) == 0;
  }
  ~NotifySocket() { close(fd_); }
  bool bound() const { return bound_; }
  std::string env() const { return "@" + name_; }
  std::string Receive() {
    char buffer[256];
    const ssize_t n = recv(fd_, buffer, sizeof(buffer), MSG_DONTWAIT);
    return n < 0 ? "" : std::string(buffer, n);
  }

 private:
  std::string name_;
  int fd_ = -1;
  bool bound_ = false;
};

TEST(SdNotifyTest, SendsTheStateToNotifySocket) {
  NotifySocket socket;
  ASSERT_TRUE(socket.bound());
  setenv("NOTIFY_SOCKET", socket.env().c_str(), 1);
  EXPECT_TRUE(NotifySystemd("READY=1\nSTATUS=serving"));
  EXPECT_EQ(socket.Receive(), "READY=1\nSTATUS=serving");
  unsetenv("NOTIFY_SOCKET");
}

TEST(SdNotifyTest, NotUnderSystemdSendsNothing) {
  unsetenv("NOTIFY_SOCKET");
  EXPECT_FALSE(NotifySystemd("READY=1"));
  setenv("NOTIFY_SOCKET", "relative/path", 1);
  EXPECT_FALSE(NotifySystemd("READY=1"));
  unsetenv("NOTIFY_SOCKET");
}

TEST(SdNotifyTest, WatchdogIntervalIsForThisProcessOnly) {
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
  EXPECT_EQ(SystemdWatchdogInterval(), absl::ZeroDuration());
  setenv("WATCHDOG_USEC", "60000000", 1);
  EXPECT_EQ(SystemdWatchdogInterval(), absl::Seconds(60));
  setenv("WATCHDOG_PID", std::to_string(getpid()).c_str(), 1);
  EXPECT_EQ(SystemdWatchdogInterval(), absl::Seconds(60));
  setenv("WATCHDOG_PID", std::to_string(getpid() + 1).c_str(), 1);
  EXPECT_EQ(SystemdWatchdogInterval(), absl::ZeroDuration());
  unsetenv("WATCHDOG_PID");
  setenv("WATCHDOG_USEC", "soon", 1);
  EXPECT_EQ(SystemdWatchdogInterval(), absl::ZeroDuration());
  unsetenv("WATCHDOG_USEC");
}

}  // namespace
}  // namespace neffd
