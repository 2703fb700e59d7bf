// tests/harness/process.h
//
// Real processes for integration tests: spawn a binary from the test's
// runfiles with its output captured to files, signal it, wait for it; and a
// DaemonProcess that runs a real `neffd` on its own directories and unix
// socket and waits until it accepts connections.
//
// Not thread-safe per object; separate objects may be used from any thread.
#ifndef NEFFD_TESTS_HARNESS_PROCESS_H_
#define NEFFD_TESTS_HARNESS_PROCESS_H_

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "tests/harness/temp_dir.h"

namespace neffd::test_support {

// Absolute path of a file in this test's runfiles, e.g. "daemon/neffd".
std::string Runfile(const std::string& path);

std::string ReadFile(const std::string& path);
void WriteFile(const std::string& path, const std::string& content);

// Environment entries for an uninstrumented program (the system python3)
// that loads code built with this test's sanitizers: LD_PRELOAD of the
// sanitizer runtimes this test binary runs with, and no leak check (the
// interpreter's allocations live until exit). Empty in a plain build.
std::vector<std::string> SanitizerPreloadEnv();

// Environment entries with which a Python process can `import neffclient`:
// the portable ctypes module over libneffclient.so when `portable`, else the
// pybind11 extension (the test's data must hold them), plus
// SanitizerPreloadEnv().
std::vector<std::string> NeffclientPythonEnv(bool portable);

// "Wait until X": polls `condition` every 10 ms until it holds (true) or
// `timeout` has passed (false). Never a bare sleep standing for X.
bool WaitUntil(const std::function<bool()>& condition,
               absl::Duration timeout = absl::Seconds(10));

class Process {
 public:
  // Starts argv[0] (an absolute path) with the environment of the test plus
  // `env` ("NAME=value", replacing the test's value of NAME). Aborts the
  // test binary if the spawn fails.
  Process(std::vector<std::string> argv, std::vector<std::string> env = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  void Signal(int sig);
  // Exit code, or 128 + signal number. Idempotent.
  int Wait();
  // False once it has exited (reaps it).
  bool Running();
  std::string Stdout() const { return ReadFile(out_path_); }
  std::string Stderr() const { return ReadFile(err_path_); }

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  std::string out_path_, err_path_;
};

struct CommandResult {
  int exit_code;
  std::string out;
  std::string err;
};

// Polls `observed` every 5 ms until it is true or `limit` passes; returns
// whether it became true. The way a test waits for a state it can observe
// (never a bare sleep).
bool PollUntil(const std::function<bool()>& observed, absl::Duration limit);

CommandResult RunCommand(std::vector<std::string> argv,
                         std::vector<std::string> env = {});

class DaemonProcess;

// neffctl --address and --admin_address of `daemon`, then `args`, as an
// operator runs it.
CommandResult RunNeffctl(const DaemonProcess& daemon,
                         const std::vector<std::string>& args);

// The daemon's leases and parked Lock calls now (CacheAdmin.GetLocks); empty
// if it does not answer. For "wait until the waiter is parked" and "wait
// until the publish is in flight" (a lease with `publishing`).
v1::LocksResponse GetLocks(const DaemonProcess& daemon);

// The daemon's GetStats now; empty if it does not answer.
v1::Stats StatsOf(const DaemonProcess& daemon);

// GetLocks(daemon).waiters(): Lock calls parked now, all keys.
uint64_t LockWaiters(const DaemonProcess& daemon);

// True if process `pid` has a file open whose path ends with `suffix`
// (/proc/{pid}/fd): e.g. a daemon-less rank polling a key's lock file.
bool HasOpenFile(pid_t pid, const std::string& suffix);

// One Lock call on `id` as a rank sends it: waiting (up to `wait_seconds`,
// 0: the daemon's default) unless `wait` is false, with `look_up` and
// `wake_file` as given. Unavailable with gRPC's message if the call fails.
struct LockCall {
  bool wait = true;
  uint32_t wait_seconds = 0;
  bool look_up = false;
  bool wake_file = false;
};
absl::StatusOr<v1::LockResponse> CallLock(v1::CompileCache::Stub& stub,
                                          const v1::EntryId& id,
                                          const LockCall& call = {});

// Takes the lock on `id` and publishes `bytes` inline with `metadata`, as a
// rank would. AlreadyExists if the entry was cached (the lock answered
// READY).
absl::Status PublishInline(
    v1::CompileCache::Stub& stub, const v1::EntryId& id,
    const std::string& bytes,
    const std::map<std::string, std::string>& metadata = {});
// The second half of PublishInline: publishes `bytes` inline under the lease
// `lease_id` already granted on `id`.
absl::Status PublishHeld(
    v1::CompileCache::Stub& stub, const std::string& lease_id,
    const v1::EntryId& id, const std::string& bytes,
    const std::map<std::string, std::string>& metadata = {});

class DaemonProcess {
 public:
  // Runs neffd with --cache_dir={root}/neff --hlo_cache_dir={root}/hlo
  // --local_dir={root}/local --address=unix:{a short /tmp dir}/neffd.sock
  // --admin_address=unix:{the same dir}/admin.sock plus `flags`.
  // `flags` come after the defaults and so override them; `env` entries
  // ("NAME=value") are added to the daemon's environment.
  DaemonProcess(std::string root, std::vector<std::string> flags = {},
                std::vector<std::string> env = {});
  // Another daemon on the same directories and socket (not started).
  DaemonProcess(const DaemonProcess& other);
  ~DaemonProcess();

  // The daemon binary Start() runs, as a runfile (default "daemon/neffd";
  // a test build such as "tests/faults/neffd_crash_points").
  void set_binary(std::string runfile) { binary_ = std::move(runfile); }

  // (Re)starts and waits for the daemon's own readiness event, as systemd's
  // Type=notify does: READY=1 on NOTIFY_SOCKET, sent once both sockets
  // serve. No deadline: a slow start on a loaded machine is waited for (the
  // test's own timeout bounds a hung one); false as soon as it exits. A
  // test that passes its own NOTIFY_SOCKET reads READY=1 itself, and Start()
  // waits until the socket accepts connections instead.
  bool Start();
  // How long the last successful Start() took, spawn to READY=1.
  absl::Duration start_duration() const { return start_duration_; }
  // The command line Start() runs, for callers that spawn and time it
  // themselves.
  std::vector<std::string> Argv() const;
  void Signal(int sig) { process_->Signal(sig); }
  int Wait() { return process_->Wait(); }
  Process& process() { return *process_; }

  const std::string& root() const { return root_; }
  const std::string& address() const { return address_; }
  const std::string& socket_path() const { return socket_path_; }
  // The operators' socket (evict, gc, import, drain, undrain, stats -z).
  const std::string& admin_address() const { return admin_address_; }
  std::string neff_dir() const { return root_ + "/neff"; }
  std::string local_dir() const { return root_ + "/local"; }
  std::unique_ptr<v1::CompileCache::Stub> NewStub() const;
  // neffctl with --address and --admin_address of this daemon, to which
  // callers append the command.
  std::vector<std::string> NeffctlArgv() const;

 private:
  std::string root_;
  std::string socket_path_;
  std::string address_;
  std::string admin_address_;
  std::vector<std::string> flags_;
  std::vector<std::string> env_;
  std::string binary_ = "daemon/neffd";
  std::unique_ptr<Process> process_;
  absl::Duration start_duration_;
};

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_HARNESS_PROCESS_H_
