// client/neffctl/doctor.h
//
// `neffctl doctor`: checks a job's environment the way support would, one
// answer per question, each failure with its fix (docs/OPERATIONS.md,
// "neffctl doctor"):
//
//   neuronx-cc on PATH  the first `neuronx-cc` on PATH resolves to neffcc
//                       (a virtualenv's own compiler first bypasses neffd)
//   real compiler       neffcc finds the real compiler, and its --version
//   daemon              the daemon answers on its socket as this user
//   directories         TORCH_NEURONX_{NEFF,HLO}_CACHE_DIR and
//                       TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR here are the
//                       daemon's
//   local directory     the local directory is on a local filesystem
//   store writable      this user can create a file in the NEFF store
//   S3 tier             off, or its circuit breaker is not open
//
// RunDoctor asks the filesystem through `fs` (so a test can make a directory
// look like NFS) and runs the real compiler's --version; what the daemon
// answered is gathered by the caller. A check that depends on an earlier
// failure (the directories when the daemon did not answer) is skipped, not
// failed twice. Thread-compatible.
#ifndef NEFFD_CLIENT_NEFFCTL_DOCTOR_H_
#define NEFFD_CLIENT_NEFFCTL_DOCTOR_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "config/env.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "store/env.h"

namespace neffd::ctl {

enum class CheckState { kOk, kFail, kSkip };

struct DoctorCheck {
  std::string name;  // "neuronx-cc on PATH"
  CheckState state = CheckState::kOk;
  std::string finding;  // what was found
  std::string fix;      // what to do; empty unless the check failed
};

// What the daemon answered to GetConfig and GetStats.
struct DaemonAnswers {
  std::string address;   // as resolved, "unix:/run/neffd/neffd.sock"
  absl::Status reached;  // OK if it answered
  v1::ConfigResponse config;
  v1::Stats stats;
};

struct DoctorOptions {
  std::string path_env;  // PATH
  // The job's TORCH_NEURONX_* and NEFFD_*.
  config::EnvSnapshot env = config::EnvSnapshot::FromMap({});
  DaemonAnswers daemon;
  Env* fs = Env::Default();
};

std::vector<DoctorCheck> RunDoctor(const DoctorOptions& options);

// "ok", "FAIL" or "skip".
const char* CheckStateName(CheckState state);

// True when no check failed.
bool AllPassed(const std::vector<DoctorCheck>& checks);

}  // namespace neffd::ctl

#endif  // NEFFD_CLIENT_NEFFCTL_DOCTOR_H_
