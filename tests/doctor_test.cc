// `neffctl doctor` as support runs it in a job's shell: the real neffctl,
// neffcc and daemon, a stand-in real compiler in a virtualenv's bin/.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"
#include "tests/harness/temp_dir.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

class DoctorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TestTempDir();
    fs::create_directories(root_ + "/venv/bin");
    fs::create_directories(root_ + "/masquerade");
    const std::string compiler = root_ + "/venv/bin/neuronx-cc";
    std::ofstream(compiler)
        << "#!/bin/sh\necho 'NeuronX Compiler version 2.21.33363.0'\n";
    chmod(compiler.c_str(), 0755);
    fs::create_symlink(fs::absolute(Runfile("client/neffcc")),
                       root_ + "/masquerade/neuronx-cc");
    daemon_ = std::make_unique<DaemonProcess>(root_ + "/d");
    ASSERT_TRUE(daemon_->Start());
  }

  // The job's environment: neffcc first on PATH, the daemon's directories.
  std::vector<std::string> JobEnv(const std::string& path) const {
    const std::string d = daemon_->root();
    return {"PATH=" + path, "TORCH_NEURONX_NEFF_CACHE_DIR=" + d + "/neff",
            "TORCH_NEURONX_HLO_CACHE_DIR=" + d + "/hlo",
            "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR=" + d + "/local"};
  }
  std::string GoodPath() const {
    return absl::StrCat(root_, "/masquerade:", root_,
                        "/venv/bin:/usr/bin:/bin");
  }

  CommandResult Doctor(const std::vector<std::string>& env,
                       std::vector<std::string> argv) const {
    argv.push_back("doctor");
    return RunCommand(argv, env);
  }

  std::string root_;
  std::unique_ptr<DaemonProcess> daemon_;
};

TEST_F(DoctorTest, ACorrectSetupPassesWithOneLinePerCheck) {
  const CommandResult r = Doctor(JobEnv(GoodPath()), daemon_->NeffctlArgv());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  for (const char* line : {"ok    neuronx-cc on PATH:", "ok    real compiler:",
                           "2.21.33363.0", "ok    daemon: answers at",
                           "ok    directories:", "ok    local directory:",
                           "ok    store writable:", "ok    S3 tier: off"}) {
    EXPECT_TRUE(absl::StrContains(r.out, line)) << line << "\n" << r.out;
  }
  const CommandResult json = Doctor(JobEnv(GoodPath()), [&] {
    std::vector<std::string> argv = daemon_->NeffctlArgv();
    argv.push_back("--json");
    return argv;
  }());
  EXPECT_EQ(json.exit_code, 0) << json.err;
  EXPECT_TRUE(absl::StrContains(json.out, "\"ok\":true")) << json.out;
}

TEST_F(DoctorTest, TheVirtualenvsCompilerFirstOnPathFails) {
  const CommandResult r = Doctor(
      JobEnv(absl::StrCat(root_, "/venv/bin:", root_, "/masquerade:/usr/bin")),
      daemon_->NeffctlArgv());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(absl::StrContains(
      r.out, absl::StrCat("FAIL  neuronx-cc on PATH: ", root_,
                          "/venv/bin/neuronx-cc is the real compiler")))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "fix: export PATH=")) << r.out;
}

TEST_F(DoctorTest, AnUnreachableDaemonFails) {
  const CommandResult r = Doctor(
      JobEnv(GoodPath()), {Runfile("client/neffctl"),
                           "--address=unix:" + root_ + "/nobody-serves.sock"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "FAIL  daemon: no answer at unix:" +
                                           root_ + "/nobody-serves.sock"))
      << r.out;
  EXPECT_TRUE(absl::StrContains(r.out, "skip  directories:")) << r.out;
}

TEST_F(DoctorTest, DirectoriesThatAreNotTheDaemonsFail) {
  std::vector<std::string> env = JobEnv(GoodPath());
  env[1] = "TORCH_NEURONX_NEFF_CACHE_DIR=" + root_ + "/elsewhere";
  fs::create_directories(root_ + "/elsewhere");
  const CommandResult r = Doctor(env, daemon_->NeffctlArgv());
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_TRUE(absl::StrContains(r.out,
                                "FAIL  directories: "
                                "TORCH_NEURONX_NEFF_CACHE_DIR="))
      << r.out;
}

}  // namespace
}  // namespace neffd::test_support
