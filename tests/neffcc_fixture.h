// The end-to-end fixture of neffcc's tests (issues 17 and 28): a directory
// early on PATH holds a neuronx-cc symlink to the real //client:neffcc, the
// real compiler later on PATH is tests/fake_neuronx_cc (which counts its
// compiles), and a real neffd from the harness serves the cache. Calls are
// made the way libneuronxla makes them, each in its own work directory.
#ifndef NEFFD_TESTS_NEFFCC_FIXTURE_H_
#define NEFFD_TESTS_NEFFCC_FIXTURE_H_

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/explain.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/harness/process.h"
#include "tests/harness/store_files.h"

namespace neffd::test_support {

inline constexpr char kVersion[] = "2.19.8089.0+8ab9f450";
inline constexpr char kVersionDir[] = "neuronxcc-2.19.8089.0+8ab9f450";

inline std::string DirOf(const std::string& path) {
  return path.substr(0, path.rfind('/'));
}

// `argv` run with `dir` as its working directory.
inline std::vector<std::string> InDir(const std::string& dir,
                                      std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", dir});
  return argv;
}

inline std::string LastLine(const std::string& text) {
  std::vector<std::string> lines =
      absl::StrSplit(text, '\n', absl::SkipEmpty());
  return lines.empty() ? "" : lines.back();
}

class NeffccTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = NewTempDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    for (const char* dir : {"/mask", "/real", "/work"}) {
      ASSERT_EQ(mkdir((root_ + dir).c_str(), 0755), 0);
    }
    ASSERT_EQ(symlink(Runfile("client/neffcc").c_str(),
                      (root_ + "/mask/neuronx-cc").c_str()),
              0);
    ASSERT_EQ(symlink(Runfile("tests/fake_neuronx_cc").c_str(),
                      (root_ + "/real/neuronx-cc").c_str()),
              0);
    daemon_ = std::make_unique<DaemonProcess>(root_);
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
  }

  // A rank's environment: the masquerade first on PATH, then the compiler;
  // `more` adds or replaces variables.
  std::vector<std::string> Env(std::vector<std::string> more = {}) const {
    std::vector<std::string> env = {
        absl::StrCat("PATH=", root_, "/mask:", root_, "/real:/usr/bin:/bin"),
        "NEFFD_ADDRESS=" + daemon_->address(),
        "TORCH_NEURONX_NEFF_CACHE_DIR=" + root_ + "/neff",
        "TORCH_NEURONX_HLO_CACHE_DIR=" + root_ + "/hlo",
        "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR=" + root_ + "/local",
        "TORCH_NEURONX_DEBUG_DIR=" + root_ + "/debug",
        "FAKE_NEURONX_CC_RUNS=" + runs_file(),
    };
    for (std::string& entry : more) {
      const std::string name = entry.substr(0, entry.find('=') + 1);
      auto same = std::find_if(env.begin(), env.end(), [&](const auto& e) {
        return absl::StartsWith(e, name);
      });
      if (same != env.end()) env.erase(same);
      env.push_back(std::move(entry));
    }
    return env;
  }

  // libneuronxla's layout: a fresh work directory per compile, the graph in
  // model.MODULE_<hash>+<flagshash>.hlo_module.pb.
  struct Call {
    std::string input;
    std::string output;
  };
  Call NewCall(const std::string& graph) {
    const std::string dir =
        absl::StrCat(root_, "/work/", ++calls_, "-", rand());
    EXPECT_EQ(mkdir(dir.c_str(), 0755), 0);
    Call call{dir + "/model.MODULE_" + graph + "+4fd1c.hlo_module.pb",
              dir + "/model.MODULE_" + graph + "+4fd1c.neff"};
    WriteFile(call.input, absl::StrCat("HloModule ", graph, "\n"));
    return call;
  }

  std::vector<std::string> Argv(const Call& call,
                                std::vector<std::string> extra = {}) const {
    std::vector<std::string> argv = {root_ + "/mask/neuronx-cc",
                                     "compile",
                                     "--target=trn1",
                                     "--framework=XLA",
                                     call.input,
                                     "--output",
                                     call.output,
                                     "--verbose=35"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return argv;
  }

  // `form` with IN and OUT replaced by the call's paths, after the
  // masquerade's neuronx-cc.
  std::vector<std::string> FormArgv(
      const Call& call, const std::vector<std::string>& form) const {
    std::vector<std::string> argv = {root_ + "/mask/neuronx-cc"};
    for (const std::string& arg : form) {
      argv.push_back(arg == "IN"    ? call.input
                     : arg == "OUT" ? call.output
                                    : arg);
    }
    return argv;
  }

  // What the compiler itself makes of `call` (run directly, not counted).
  std::string Reference(const Call& call, std::vector<std::string> extra = {}) {
    const std::string out = call.output + ".reference";
    std::vector<std::string> argv = {Runfile("tests/fake_neuronx_cc"),
                                     "compile",
                                     "--target=trn1",
                                     "--framework=XLA",
                                     call.input,
                                     "--output",
                                     out};
    argv.insert(argv.end(), extra.begin(), extra.end());
    CommandResult r = RunCommand(argv, {"FAKE_NEURONX_CC_RUNS=/dev/null"});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return ReadFile(out);
  }

  // The caller got its own regular file with the compiler's bytes.
  void ExpectOwnNeff(const Call& call, const std::string& expected) {
    struct stat st;
    ASSERT_EQ(lstat(call.output.c_str(), &st), 0) << call.output;
    EXPECT_TRUE(S_ISREG(st.st_mode)) << call.output << " is not a file";
    EXPECT_EQ(st.st_nlink, 1u) << call.output << " is linked";
    EXPECT_TRUE(ReadFile(call.output) == expected) << call.output;
  }

  int Runs() const { return ReadLines(runs_file()).size(); }

  // The keys of the store's entries and failures (their records
  // directories, store/layout.h).
  std::vector<std::string> Keys() const {
    std::vector<std::string> keys;
    const std::string dir = root_ + "/neff";
    if (!std::filesystem::exists(dir)) return keys;
    for (const auto& entry :
         std::filesystem::recursive_directory_iterator(dir)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_directory() && absl::EndsWith(name, ".neffd")) {
        keys.push_back(entry.path().stem().string());
      }
    }
    std::sort(keys.begin(), keys.end());
    return keys;
  }
  std::string OnlyKey() const {
    std::vector<std::string> keys = Keys();
    EXPECT_EQ(keys.size(), 1u);
    return keys.empty() ? "" : keys[0];
  }
  // The key neffcc gave `call`, from its miss record (written before it
  // compiled).
  std::string KeyOf(const Call& call) const {
    for (const std::string& key : Keys()) {
      absl::StatusOr<v1::KeyInputsRecord> record =
          KeyInputsFromJson(ReadFile(FilesOf(root_ + "/neff", key).key_inputs));
      if (record.ok() &&
          absl::StrContains(absl::StrJoin(record->invocation(), " "),
                            call.input)) {
        return key;
      }
    }
    return "";
  }
  std::string runs_file() const { return root_ + "/runs.txt"; }

  std::string root_;
  int calls_ = 0;
  std::unique_ptr<DaemonProcess> daemon_;
};

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_NEFFCC_FIXTURE_H_
