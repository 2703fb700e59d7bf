// daemon/runtime/sd_notify.h
//
// systemd's notify protocol (sd_notify(3), the unit's Type=notify and
// WatchdogSec=) without libsystemd: one datagram to $NOTIFY_SOCKET. The
// release links everything but glibc and a few sonames statically
// (deploy/package.sh) and Debian ships no static libsystemd; the protocol is
// a documented, stable datagram, and these two calls are all neffd used.
//
// Thread-safety: both read the environment, so they must not run
// concurrently with setenv; otherwise safe from any thread.
#ifndef NEFFD_DAEMON_RUNTIME_SD_NOTIFY_H_
#define NEFFD_DAEMON_RUNTIME_SD_NOTIFY_H_

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace neffd {

// Sends `state` ("READY=1", "WATCHDOG=1", "STOPPING=1\nSTATUS=...") to the
// unix datagram socket $NOTIFY_SOCKET names (a path, or "@name" for an
// abstract one). True if sent; false if the variable is unset (not under
// systemd) or sending failed, which callers ignore as sd_notify's did.
bool NotifySystemd(absl::string_view state);

// How often systemd expects "WATCHDOG=1": $WATCHDOG_USEC when it is set and
// $WATCHDOG_PID is unset or this process; zero (no watchdog) otherwise.
absl::Duration SystemdWatchdogInterval();

}  // namespace neffd

#endif  // NEFFD_DAEMON_RUNTIME_SD_NOTIFY_H_
