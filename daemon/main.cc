// neffd: the per-host compile-cache daemon. See daemon/runtime/daemon.h for
// what it serves and daemon/flags.h for its command line.
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "config/env.h"
#include "daemon/flags.h"
#include "daemon/log/log.h"
#include "daemon/runtime/daemon.h"
#include "daemon/runtime/sd_notify.h"

namespace neffd {

#ifdef NEFFD_TEST_ENV_HOOK
// Test builds of the daemon (tests/faults:neffd_crash_points) define it to
// wrap the filesystem; the production binary has no such hook.
Env* TestEnv();
#endif

namespace {

// The stop signals, blocked before any thread starts so only sigwait sees
// them.
sigset_t BlockStopSignals() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return stop;
}

// Every client connection is an fd; the default soft limit (1024) would
// make gRPC stop accepting, and clients hang, long before the daemon's caps
// refuse anything. The hard limit is the operator's (LimitNOFILE).
void RaiseFileLimit() {
  struct rlimit files;
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 &&
      files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

// Exit code 2 for what the operator must fix (configuration, another
// daemon on the socket, permissions), 1 for anything else.
int StartFailure(const absl::Status& status) {
  const bool config_error =
      absl::IsInvalidArgument(status) || absl::IsFailedPrecondition(status) ||
      absl::IsAlreadyExists(status) || absl::IsPermissionDenied(status);
  return ReportError(config_error ? kExitBadConfig : 1, status.message());
}

void AnnounceStarted(const Daemon& daemon, const DaemonOptions& options) {
  if (std::string note = daemon.IndexRecoveryNote(); !note.empty()) {
    log::Warning("index_recovered", {{"note", note}});
  }
  std::printf("%s\n", daemon.Describe().c_str());
  std::fflush(stdout);
  log::Info("started", {{"address", options.address},
                        {"cache_dir", options.neff_cache_dir},
                        {"local_dir", options.local_dir}});
  NotifySystemd("READY=1\nSTATUS=serving");
}

// Serves until SIGTERM or SIGINT, reloading on SIGHUP; returns the signal.
int ServeUntilStopped(Daemon& daemon, const sigset_t& stop,
                      const config::EnvSnapshot& env) {
  int signal_number = 0;
  for (;;) {
    sigwait(&stop, &signal_number);
    if (signal_number != SIGHUP) return signal_number;
    log::Configure(Verbosity(env, true), env.IsSet("JOURNAL_STREAM"));
    daemon.Reload();
    log::Warning("reloaded", {{"v", log::Verbosity()}});
  }
}

int Main(int argc, char** argv) {
  // Debian's absl is built without NDEBUG, which makes every Mutex lock run
  // the deadlock detector (~25 ns each); the daemon's locks are ordered by
  // design, so skip it as a release build of absl would.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  ParseFlagsOrExit(argc, argv);
  const config::EnvSnapshot env = config::EnvSnapshot::FromProcessEnvironment();
  log::Configure(Verbosity(env, false), env.IsSet("JOURNAL_STREAM"));
  for (const std::string& warning : env.warnings()) {
    log::Warning("config", {{"warning", warning}});
  }
  DaemonOptions options;
  if (std::vector<std::string> errors = OptionsFromFlags(env, &options);
      !errors.empty()) {
    for (const std::string& error : errors) ReportError(kExitBadConfig, error);
    return kExitBadConfig;
  }
  options.config = DescribeConfig(options, env, log::Verbosity());
#ifdef NEFFD_TEST_ENV_HOOK
  options.env = TestEnv();
#endif

  const sigset_t stop = BlockStopSignals();
  RaiseFileLimit();
  absl::StatusOr<std::unique_ptr<Daemon>> daemon = Daemon::Start(options);
  if (!daemon.ok()) return StartFailure(daemon.status());
  AnnounceStarted(**daemon, options);

  const int signal_number = ServeUntilStopped(**daemon, stop, env);
  NotifySystemd("STOPPING=1\nSTATUS=draining");
  log::Warning("draining",
               {{"signal", signal_number == SIGTERM ? "SIGTERM" : "SIGINT"}});
  (*daemon)->Shutdown();
  log::Warning("stopped");
  return 0;
}

}  // namespace
}  // namespace neffd

int main(int argc, char** argv) { return neffd::Main(argc, argv); }
