#include "client/neffctl/doctor.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/env.h"
#include "tests/harness/temp_dir.h"

namespace neffd::ctl {
namespace {

namespace fs = std::filesystem;

// Says every path is on NFS, as statfs(2) would for an NFS mount.
class NfsEnv : public EnvWrapper {
 public:
  NfsEnv() : EnvWrapper(Env::Default()) {}
  absl::StatusOr<int64_t> FilesystemType(const std::string&) override {
    return 0x6969;  // NFS_SUPER_MAGIC
  }
};

// Refuses access(2) as for a user outside the socket's group (the tests run
// as root, who may open anything).
class NotInTheGroupEnv : public EnvWrapper {
 public:
  NotInTheGroupEnv() : EnvWrapper(Env::Default()) {}

 protected:
  absl::Status BeforeCall(const FsCall& call) override {
    if (call.op != FsOp::kAccess) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat("access ", call.path));
  }
};

class DoctorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir();
    for (const char* dir : {"venv/bin", "neffd/bin", "store", "hlo", "local"}) {
      fs::create_directories(root_ + "/" + dir);
    }
    // A stand-in for the real compiler and one for neffcc (what matters is
    // the name the masquerade link resolves to).
    WriteScript(root_ + "/venv/bin/neuronx-cc",
                "echo 'NeuronX Compiler version 2.19.8089.0+8ab9f450'");
    WriteScript(root_ + "/neffd/neffcc", "exit 0");
    fs::create_symlink(root_ + "/neffd/neffcc",
                       root_ + "/neffd/bin/neuronx-cc");
    options_.path_env =
        absl::StrCat(root_, "/neffd/bin:", root_, "/venv/bin:/usr/bin:/bin");
    options_.env = config::EnvSnapshot::FromMap({
        {"TORCH_NEURONX_NEFF_CACHE_DIR", root_ + "/store"},
        {"TORCH_NEURONX_HLO_CACHE_DIR", root_ + "/hlo"},
        {"TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", root_ + "/local"},
    });
    options_.daemon.address = "unix:" + root_ + "/neffd.sock";
    for (const auto& [name, value] :
         std::map<std::string, std::string>{{"cache_dir", root_ + "/store"},
                                            {"hlo_cache_dir", root_ + "/hlo"},
                                            {"local_dir", root_ + "/local"}}) {
      v1::ConfigValue* setting = options_.daemon.config.add_settings();
      setting->set_name(name);
      setting->set_value(value);
    }
  }

  static void WriteScript(const std::string& path, const std::string& body) {
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    chmod(path.c_str(), 0755);
  }

  // The check named `name` of a run with options_.
  DoctorCheck Check(const std::string& name) {
    for (DoctorCheck& check : RunDoctor(options_)) {
      if (check.name == name) return check;
    }
    ADD_FAILURE() << "no check " << name;
    return {};
  }

  std::string root_;
  DoctorOptions options_;
};

TEST_F(DoctorTest, ACorrectSetupPassesEveryCheck) {
  const std::vector<DoctorCheck> checks = RunDoctor(options_);
  EXPECT_TRUE(AllPassed(checks));
  for (const DoctorCheck& check : checks) {
    EXPECT_EQ(check.state, CheckState::kOk)
        << check.name << ": " << check.finding;
    EXPECT_EQ(check.fix, "") << check.name;
  }
  EXPECT_TRUE(absl::StrContains(Check("real compiler").finding,
                                "2.19.8089.0+8ab9f450"));
  EXPECT_TRUE(absl::StrContains(Check("neuronx-cc on PATH").finding, "neffcc"));
  EXPECT_EQ(Check("S3 tier").finding, "off");
}

TEST_F(DoctorTest, TheVirtualenvsCompilerFirstOnPathFails) {
  options_.path_env =
      absl::StrCat(root_, "/venv/bin:", root_, "/neffd/bin:/usr/bin:/bin");
  const DoctorCheck check = Check("neuronx-cc on PATH");
  EXPECT_EQ(check.state, CheckState::kFail);
  EXPECT_TRUE(absl::StrContains(check.finding, root_ + "/venv/bin/neuronx-cc"))
      << check.finding;
  EXPECT_TRUE(absl::StrContains(check.fix, "export PATH=")) << check.fix;
  EXPECT_FALSE(AllPassed(RunDoctor(options_)));
}

TEST_F(DoctorTest, NoRealCompilerBehindNeffccFails) {
  options_.path_env = absl::StrCat(root_, "/neffd/bin:/usr/bin:/bin");
  const DoctorCheck check = Check("real compiler");
  EXPECT_EQ(check.state, CheckState::kFail);
  EXPECT_TRUE(absl::StrContains(check.fix, "NEFFD_REAL_COMPILER"));
}

TEST_F(DoctorTest, AnUnreachableDaemonFailsAndSkipsWhatNeedsIt) {
  options_.daemon.reached = absl::UnavailableError("connection refused");
  const DoctorCheck daemon = Check("daemon");
  EXPECT_EQ(daemon.state, CheckState::kFail);
  EXPECT_TRUE(absl::StrContains(daemon.finding, options_.daemon.address));
  EXPECT_TRUE(absl::StrContains(daemon.fix, "systemctl start neffd"));
  EXPECT_EQ(Check("directories").state, CheckState::kSkip);
  EXPECT_EQ(Check("S3 tier").state, CheckState::kSkip);
}

TEST_F(DoctorTest, ASocketThisUserCannotOpenNamesTheGroup) {
  std::ofstream(root_ + "/neffd.sock") << "";
  NotInTheGroupEnv outsider;
  options_.fs = &outsider;
  options_.daemon.reached = absl::UnavailableError("permission denied");
  const DoctorCheck daemon = Check("daemon");
  EXPECT_EQ(daemon.state, CheckState::kFail);
  EXPECT_TRUE(absl::StrContains(daemon.fix, "group")) << daemon.fix;
}

TEST_F(DoctorTest, DirectoriesOtherThanTheDaemonsFail) {
  options_.env = config::EnvSnapshot::FromMap({
      {"TORCH_NEURONX_NEFF_CACHE_DIR", root_ + "/elsewhere"},
      {"TORCH_NEURONX_HLO_CACHE_DIR", root_ + "/hlo"},
      {"TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", root_ + "/local"},
  });
  const DoctorCheck check = Check("directories");
  EXPECT_EQ(check.state, CheckState::kFail);
  EXPECT_TRUE(absl::StrContains(check.finding, "TORCH_NEURONX_NEFF_CACHE_DIR"));
  EXPECT_TRUE(absl::StrContains(check.fix, root_ + "/store")) << check.fix;
}

TEST_F(DoctorTest, ALocalDirectoryOnANetworkFilesystemFails) {
  NfsEnv nfs;
  options_.fs = &nfs;
  const DoctorCheck check = Check("local directory");
  EXPECT_EQ(check.state, CheckState::kFail);
  EXPECT_TRUE(absl::StrContains(check.finding, "nfs")) << check.finding;
  EXPECT_TRUE(
      absl::StrContains(check.fix, "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR"));
}

TEST_F(DoctorTest, AStoreThisUserCannotWriteFails) {
  // A file where the store should be: no user can create files in it.
  fs::remove(root_ + "/store");
  std::ofstream(root_ + "/store") << "";
  const DoctorCheck check = Check("store writable");
  EXPECT_EQ(check.state, CheckState::kFail);
  EXPECT_TRUE(absl::StrContains(check.finding, root_ + "/store"));
}

TEST_F(DoctorTest, AnOpenS3BreakerFails) {
  options_.daemon.stats.set_remote("s3://bucket/prefix");
  options_.daemon.stats.set_remote_mode("rw");
  options_.daemon.stats.set_remote_breaker("closed");
  EXPECT_EQ(Check("S3 tier").state, CheckState::kOk);
  options_.daemon.stats.set_remote_breaker("open");
  const DoctorCheck check = Check("S3 tier");
  EXPECT_EQ(check.state, CheckState::kFail);
  EXPECT_TRUE(absl::StrContains(check.finding, "s3://bucket/prefix"));
}

}  // namespace
}  // namespace neffd::ctl
