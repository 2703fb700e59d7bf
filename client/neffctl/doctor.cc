#include "client/neffctl/doctor.h"

#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "client/neffcc/real_compiler.h"
#include "store/file_util.h"

namespace neffd::ctl {
namespace {

constexpr char kCompilerName[] = "neuronx-cc";
// deploy/install.sh's masquerade directory: `neuronx-cc` -> neffcc.
constexpr char kMasqueradeDir[] = "/usr/local/lib/neffd/bin";

DoctorCheck Ok(std::string name, std::string finding) {
  return {std::move(name), CheckState::kOk, std::move(finding), ""};
}

DoctorCheck Fail(std::string name, std::string finding, std::string fix) {
  return {std::move(name), CheckState::kFail, std::move(finding),
          std::move(fix)};
}

DoctorCheck Skip(std::string name, std::string why) {
  return {std::move(name), CheckState::kSkip, std::move(why), ""};
}

std::string Resolved(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) == nullptr ? path : resolved;
}

bool IsNeffcc(const std::string& resolved) {
  return resolved.substr(resolved.rfind('/') + 1) == "neffcc";
}

// The first neuronx-cc on PATH; `neffcc` is set to its resolved path if it
// is neffcc.
DoctorCheck CheckCompilerOnPath(const std::string& path_env,
                                std::string* neffcc) {
  const char* name = "neuronx-cc on PATH";
  absl::StatusOr<std::string> first =
      neffcc::FindRealCompiler("", kCompilerName, path_env, "");
  if (!first.ok()) {
    return Fail(name, "no neuronx-cc on PATH",
                absl::StrCat("export PATH=", kMasqueradeDir, ":$PATH"));
  }
  const std::string resolved = Resolved(*first);
  if (IsNeffcc(resolved)) {
    *neffcc = resolved;
    return Ok(name, absl::StrCat(*first, " -> ", resolved));
  }
  return Fail(name,
              absl::StrCat(*first,
                           " is the real compiler, so every compile "
                           "bypasses neffd"),
              absl::StrCat("export PATH=", kMasqueradeDir,
                           ":$PATH after activating the virtualenv"));
}

DoctorCheck CheckRealCompiler(const config::EnvSnapshot& env,
                              const std::string& path_env,
                              const std::string& neffcc) {
  const char* name = "real compiler";
  absl::StatusOr<std::string> compiler = neffcc::FindRealCompiler(
      env.GetString("NEFFD_REAL_COMPILER"), kCompilerName, path_env, neffcc);
  if (!compiler.ok()) {
    // FindRealCompiler's message ends in its own advice; the fix says it.
    const absl::string_view message = compiler.status().message();
    return Fail(name, std::string(message.substr(0, message.find(';'))),
                "install the Neuron compiler in the job's environment, or set "
                "NEFFD_REAL_COMPILER");
  }
  absl::StatusOr<neffcc::CompilerRun> run =
      neffcc::RunCompiler({*compiler, "--version"}, /*pass_through=*/false);
  absl::StatusOr<std::string> version =
      run.ok() ? neffcc::ParseCompilerVersion(run->output) : run.status();
  if (!version.ok() || !WIFEXITED(run->wait_status) ||
      WEXITSTATUS(run->wait_status) != 0) {
    return Fail(name,
                absl::StrCat(*compiler, " --version did not give a version"),
                "reinstall the Neuron compiler (neffcc keys every entry by "
                "its version)");
  }
  return Ok(name, absl::StrCat(*compiler, ", version ", *version));
}

DoctorCheck CheckDaemon(const DaemonAnswers& daemon, Env* fs) {
  const char* name = "daemon";
  if (daemon.reached.ok()) {
    return Ok(name, absl::StrCat("answers at ", daemon.address));
  }
  const std::string finding = absl::StrCat("no answer at ", daemon.address,
                                           ": ", daemon.reached.message());
  if (absl::string_view socket = daemon.address;
      absl::ConsumePrefix(&socket, "unix:")) {
    const std::string path(socket);
    struct stat st;
    if (fs->Stat(path, &st).ok() && !fs->Access(path, R_OK | W_OK).ok()) {
      return Fail(
          name,
          absl::StrCat(finding, " (", path, " is not usable by this user)"),
          "add this user to the daemon's group (neuron) and log in "
          "again");
    }
  }
  return Fail(name, finding,
              "start it (systemctl start neffd), or set NEFFD_ADDRESS to "
              "where it serves");
}

// The daemon's value of the setting `name`, or "".
std::string Setting(const v1::ConfigResponse& config, absl::string_view name) {
  for (const v1::ConfigValue& value : config.settings()) {
    if (value.name() == name) return value.value();
  }
  return "";
}

DoctorCheck CheckDirectories(const config::EnvSnapshot& env,
                             const DaemonAnswers& daemon) {
  const char* name = "directories";
  if (!daemon.reached.ok()) return Skip(name, "the daemon did not answer");
  const std::pair<const char*, const char*> pairs[] = {
      {"TORCH_NEURONX_NEFF_CACHE_DIR", "cache_dir"},
      {"TORCH_NEURONX_HLO_CACHE_DIR", "hlo_cache_dir"},
      {"TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", "local_dir"},
  };
  for (const auto& [variable, setting] : pairs) {
    const std::string here = env.GetString(variable);
    const std::string there = Setting(daemon.config, setting);
    if (here != there) {
      return Fail(
          name,
          absl::StrCat(variable, "=", here, " here, the daemon uses ", there),
          absl::StrCat("export ", variable, "=", there,
                       " (neffctl config shows the daemon's)"));
    }
  }
  return Ok(name, "the job's cache directories are the daemon's");
}

DoctorCheck CheckLocalDirectory(const config::EnvSnapshot& env, Env* fs) {
  const char* name = "local directory";
  const std::string dir = env.GetString("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR");
  absl::Status local = CheckLocalFilesystem(dir, fs);
  if (local.ok()) return Ok(name, absl::StrCat(dir, " is local"));
  return Fail(name, std::string(local.message()),
              "set TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR to a directory on a "
              "local disk (the daemon's too)");
}

DoctorCheck CheckStoreWritable(const config::EnvSnapshot& env, Env* fs) {
  const char* name = "store writable";
  const std::string dir = env.GetString("TORCH_NEURONX_NEFF_CACHE_DIR");
  // A dot name: the store's scans and gc skip it like a temp file.
  const std::string probe =
      absl::StrCat(dir, "/", UniqueTempName("doctor", "neffctl"));
  absl::StatusOr<UniqueFd> fd =
      fs->Open(probe, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0600);
  if (!fd.ok()) {
    return Fail(name, std::string(fd.status().message()),
                "the store must be writable by the daemon's group "
                "(docs/OPERATIONS.md, \"Install\")");
  }
  (void)fs->Unlink(probe);
  return Ok(name, absl::StrCat(dir, " takes new files"));
}

DoctorCheck CheckS3(const DaemonAnswers& daemon) {
  const char* name = "S3 tier";
  if (!daemon.reached.ok()) return Skip(name, "the daemon did not answer");
  const v1::Stats& stats = daemon.stats;
  if (stats.remote().empty()) return Ok(name, "off");
  if (stats.remote_breaker() == "open") {
    return Fail(name,
                absl::StrCat(stats.remote(),
                             " is failing: its calls are "
                             "skipped until it answers again"),
                "neffctl stats shows the cause (credentials, endpoint, "
                "throttling); the daemon's log says more");
  }
  return Ok(name, absl::StrCat(stats.remote(), " (", stats.remote_mode(),
                               "), breaker ", stats.remote_breaker()));
}

}  // namespace

std::vector<DoctorCheck> RunDoctor(const DoctorOptions& options) {
  std::string neffcc;
  std::vector<DoctorCheck> checks;
  checks.push_back(CheckCompilerOnPath(options.path_env, &neffcc));
  checks.push_back(CheckRealCompiler(options.env, options.path_env, neffcc));
  checks.push_back(CheckDaemon(options.daemon, options.fs));
  checks.push_back(CheckDirectories(options.env, options.daemon));
  checks.push_back(CheckLocalDirectory(options.env, options.fs));
  checks.push_back(CheckStoreWritable(options.env, options.fs));
  checks.push_back(CheckS3(options.daemon));
  return checks;
}

const char* CheckStateName(CheckState state) {
  switch (state) {
    case CheckState::kOk:
      return "ok";
    case CheckState::kFail:
      return "FAIL";
    case CheckState::kSkip:
      return "skip";
  }
  return "?";
}

bool AllPassed(const std::vector<DoctorCheck>& checks) {
  for (const DoctorCheck& check : checks) {
    if (check.state == CheckState::kFail) return false;
  }
  return true;
}

}  // namespace neffd::ctl
