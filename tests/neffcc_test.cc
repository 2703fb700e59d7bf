// neffcc masquerading as neuronx-cc (issue 17), end to end: a directory early
// on PATH holds a neuronx-cc symlink to the real //client:neffcc, the real
// compiler later on PATH is tests/fake_neuronx_cc (which counts its
// compiles), and a real neffd from the harness serves the cache. Calls are
// made the way libneuronxla makes them, each in its own work directory.
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

namespace neffd::test_support {
namespace {

constexpr char kVersion[] = "2.19.8089.0+8ab9f450";
constexpr char kVersionDir[] = "neuronxcc-2.19.8089.0+8ab9f450";

std::string DirOf(const std::string& path) {
  return path.substr(0, path.rfind('/'));
}

// `argv` run with `dir` as its working directory.
std::vector<std::string> InDir(const std::string& dir,
                               std::vector<std::string> argv) {
  argv.insert(argv.begin(), {"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", dir});
  return argv;
}

std::string LastLine(const std::string& text) {
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

  // The keys of the store's entry directories (entries and failures).
  std::vector<std::string> Keys() const {
    std::vector<std::string> keys;
    const std::string dir = root_ + "/neff/" + kVersionDir;
    if (!std::filesystem::exists(dir)) return keys;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      std::string name = entry.path().filename().string();
      if (absl::StartsWith(name, "MODULE_")) keys.push_back(name.substr(7));
    }
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
      absl::StatusOr<v1::KeyInputsRecord> record = KeyInputsFromJson(
          ReadFile(absl::StrCat(root_, "/neff/", kVersionDir, "/MODULE_", key,
                                "/compile_flags.json")));
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

TEST_F(NeffccTest, TwentyFourCallsOverThreeGraphsCompileThreeTimes) {
  const std::vector<std::string> graphs = {"1111", "2222", "3333"};
  for (int round = 0; round < 2; ++round) {
    std::vector<Call> calls;
    std::vector<std::unique_ptr<Process>> processes;
    for (int i = 0; i < 24; ++i) {
      calls.push_back(NewCall(graphs[i % 3]));
      // The second round logs elsewhere: not part of the key.
      std::vector<std::string> extra;
      if (round == 1) extra = {"--logfile", calls.back().output + ".log"};
      processes.push_back(std::make_unique<Process>(
          Argv(calls.back(), extra), Env({"FAKE_NEURONX_CC_SLEEP_MS=300"})));
    }
    for (int i = 0; i < 24; ++i) {
      ASSERT_EQ(processes[i]->Wait(), 0) << processes[i]->Stderr();
      EXPECT_EQ(LastLine(processes[i]->Stdout()), "Compiler status PASS");
      ExpectOwnNeff(calls[i], Reference(calls[i]));
    }
    EXPECT_EQ(Runs(), 3) << "round " << round;
  }
  // Each entry carries its key inputs, without the unkeyed flags.
  const std::string version_dir = root_ + "/neff/" + kVersionDir;
  int records = 0;
  for (const auto& entry : std::filesystem::directory_iterator(version_dir)) {
    absl::StatusOr<v1::KeyInputsRecord> record = KeyInputsFromJson(
        ReadFile(entry.path().string() + "/compile_flags.json"));
    ASSERT_TRUE(record.ok()) << entry.path();
    EXPECT_EQ(absl::StrJoin(record->flags(), " "),
              "--framework=XLA --target=trn1");
    EXPECT_EQ(record->platform_target(), "trn1");
    EXPECT_EQ(record->input_size(), 15u);  // "HloModule 1111\n"
    ++records;
  }
  EXPECT_EQ(records, 3);
}

TEST_F(NeffccTest, ACodeFlagCompilesAnewAndExplainNamesIt) {
  Call plain = NewCall("5555");
  CommandResult first = RunCommand(Argv(plain), Env());
  ASSERT_EQ(first.exit_code, 0) << first.err;
  Call optimized = NewCall("5555");
  CommandResult second =
      RunCommand(Argv(optimized, {"-O2"}), Env({"NEFFD_EXPLAIN=1"}));
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(Runs(), 2);
  EXPECT_TRUE(absl::StrContains(second.err, "same input cached as"))
      << second.err;
  EXPECT_TRUE(absl::StrContains(
      second.err, "flags differing: (none) (cached) vs --optlevel=2 (now)"))
      << second.err;
  ExpectOwnNeff(optimized, Reference(optimized, {"-O2"}));
  EXPECT_FALSE(ReadFile(optimized.output) == ReadFile(plain.output));
}

TEST_F(NeffccTest, AFailingGraphCompilesOnceAndEveryCallerGetsItsError) {
  std::vector<std::unique_ptr<Process>> processes;
  for (int i = 0; i < 8; ++i) {
    Call call = NewCall("6666");
    WriteFile(call.input, "HloModule FAIL_THIS_GRAPH\n");
    processes.push_back(std::make_unique<Process>(
        Argv(call), Env({"FAKE_NEURONX_CC_SLEEP_MS=500"})));
  }
  for (auto& p : processes) {
    EXPECT_EQ(p->Wait(), 70) << p->Stderr();
    EXPECT_TRUE(absl::StrContains(p->Stderr(), "unsupported operator"))
        << p->Stderr();
  }
  EXPECT_EQ(Runs(), 1);
  // Recorded: later callers get it too, without a compile.
  Call later = NewCall("6666");
  WriteFile(later.input, "HloModule FAIL_THIS_GRAPH\n");
  CommandResult again = RunCommand(Argv(later), Env());
  EXPECT_EQ(again.exit_code, 70);
  EXPECT_TRUE(absl::StrContains(again.err, "unsupported operator"))
      << again.err;
  EXPECT_EQ(Runs(), 1);
}

TEST_F(NeffccTest, AKilledCompilerIsNotRecorded) {
  Call call = NewCall("6767");
  CommandResult killed =
      RunCommand(Argv(call), Env({"FAKE_NEURONX_CC_CRASH=1"}));
  EXPECT_EQ(killed.exit_code, 128 + SIGKILL) << killed.err;
  CommandResult next = RunCommand(Argv(NewCall("6767")), Env());
  EXPECT_EQ(next.exit_code, 0) << next.err;
  EXPECT_EQ(Runs(), 2);
}

TEST_F(NeffccTest, SwitchesAndPassThrough) {
  Call call = NewCall("7777");
  // Not cached, not allowed to compile: a distinct exit and the key.
  CommandResult refused = RunCommand(Argv(call), Env({"NEFFD_NO_COMPILE=1"}));
  EXPECT_EQ(refused.exit_code, 75) << refused.err;
  EXPECT_TRUE(absl::StrContains(refused.err, "NEFFD_NO_COMPILE=1"))
      << refused.err;
  EXPECT_TRUE(
      absl::StrContains(refused.err, "no cached entry has the same input"))
      << refused.err;
  EXPECT_EQ(Runs(), 0);

  // Disabled, by neffd's switch or the spec's: the real compiler, every
  // time, and nothing published.
  for (const char* off :
       {"NEFFD_DISABLE=1", "TORCH_NEURONX_NEFF_DISABLE_CACHE=1"}) {
    for (int i = 0; i < 2; ++i) {
      CommandResult disabled = RunCommand(Argv(call), Env({off}));
      EXPECT_EQ(disabled.exit_code, 0) << disabled.err;
      EXPECT_EQ(disabled.err, "");
    }
  }
  EXPECT_EQ(Runs(), 4);
  ExpectOwnNeff(call, Reference(call));
  EXPECT_EQ(RunCommand(Argv(call), Env({"NEFFD_NO_COMPILE=1"})).exit_code, 75);

  // Cached now: NEFFD_NO_COMPILE=1 is a hit.
  ASSERT_EQ(RunCommand(Argv(call), Env()).exit_code, 0);
  CommandResult hit =
      RunCommand(Argv(NewCall("7777")), Env({"NEFFD_NO_COMPILE=1"}));
  EXPECT_EQ(hit.exit_code, 0) << hit.err;
  EXPECT_EQ(Runs(), 5);

  CommandResult version =
      RunCommand({root_ + "/mask/neuronx-cc", "--version"}, Env());
  EXPECT_EQ(version.exit_code, 0);
  EXPECT_EQ(version.out, "NeuronX Compiler version 2.19.8089.0+8ab9f450\n");

  // Only neffcc on PATH, through two masquerade directories: no loop.
  ASSERT_EQ(mkdir((root_ + "/mask2").c_str(), 0755), 0);
  ASSERT_EQ(symlink((root_ + "/mask/neuronx-cc").c_str(),
                    (root_ + "/mask2/neuronx-cc").c_str()),
            0);
  CommandResult lost = RunCommand(
      Argv(call),
      Env({absl::StrCat("PATH=", root_, "/mask2:", root_, "/mask:/usr/bin")}));
  EXPECT_EQ(lost.exit_code, 127);
  EXPECT_EQ(std::count(lost.err.begin(), lost.err.end(), '\n'), 1) << lost.err;
  EXPECT_TRUE(absl::StrContains(lost.err, "no real neuronx-cc")) << lost.err;
}

TEST_F(NeffccTest, WithoutTheDaemonEightCallsCompileOnce) {
  daemon_->Signal(SIGKILL);
  daemon_->Wait();
  std::vector<Call> calls;
  std::vector<std::unique_ptr<Process>> processes;
  for (int i = 0; i < 8; ++i) {
    calls.push_back(NewCall("8888"));
    processes.push_back(std::make_unique<Process>(
        Argv(calls.back()), Env({"FAKE_NEURONX_CC_SLEEP_MS=300"})));
  }
  for (int i = 0; i < 8; ++i) {
    ASSERT_EQ(processes[i]->Wait(), 0) << processes[i]->Stderr();
    ExpectOwnNeff(calls[i], Reference(calls[i]));
  }
  EXPECT_EQ(Runs(), 1);
  // Without the daemon a miss is explained from the store's records.
  CommandResult optimized =
      RunCommand(Argv(NewCall("8888"), {"-O2"}), Env({"NEFFD_EXPLAIN=1"}));
  EXPECT_EQ(optimized.exit_code, 0) << optimized.err;
  EXPECT_TRUE(absl::StrContains(optimized.err, "vs --optlevel=2 (now)"))
      << optimized.err;
}

// The way libneuronxla runs the compiler: subprocess.run on "neuronx-cc"
// found through PATH, in the work directory.
TEST_F(NeffccTest, PythonSubprocessAsLibneuronxla) {
  CommandResult r =
      RunCommand({"/usr/bin/python3", Runfile("tests/neffcc_libneuronxla.py"),
                  root_ + "/work"},
                 Env());
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(LastLine(r.out), "OK 8 calls") << r.out << r.err;
  EXPECT_EQ(Runs(), 2);
}

// Issue 28: each call form the frameworks use, 4 concurrent callers each,
// is one compile per form, and every caller gets the compiler's NEFF.
TEST_F(NeffccTest, ConcurrentCallersOfEachFormCompileOnce) {
  const std::vector<std::vector<std::string>> forms = {
      // libneuronxla before 2024, and neuron_parallel_compile's workers.
      {"compile", "--target=trn1", "--framework=XLA", "IN", "--output", "OUT",
       "--verbose=35"},
      // libneuronxla since 2024 (options before the subcommand).
      {"--target=trn1", "compile", "--framework", "XLA", "IN", "--output",
       "OUT"},
      // TorchNeuron (the spec's form).
      {"compile", "IN", "--framework", "XLA", "--target", "trn2", "--lnc", "2",
       "-O1", "--output", "OUT"},
      // NxD/NxDI and vLLM with a multi-value option.
      {"compile", "--framework=XLA", "IN", "--target=trn1", "--pipeline",
       "compile", "--model-type", "transformer", "--output", "OUT"},
  };
  std::vector<Call> calls;
  std::vector<std::unique_ptr<Process>> processes;
  for (size_t f = 0; f < forms.size(); ++f) {
    for (int i = 0; i < 4; ++i) {
      calls.push_back(NewCall(absl::StrCat("f", f)));
      processes.push_back(
          std::make_unique<Process>(FormArgv(calls.back(), forms[f]),
                                    Env({"FAKE_NEURONX_CC_SLEEP_MS=300"})));
    }
  }
  for (size_t i = 0; i < processes.size(); ++i) {
    ASSERT_EQ(processes[i]->Wait(), 0) << processes[i]->Stderr();
    EXPECT_EQ(processes[i]->Stderr(), "");
    EXPECT_EQ(LastLine(processes[i]->Stdout()), "Compiler status PASS");
  }
  EXPECT_EQ(Runs(), static_cast<int>(forms.size()));
  for (size_t i = 0; i < calls.size(); i += 4) {
    const std::string expected = ReadFile(calls[i].output);
    for (size_t j = i; j < i + 4; ++j) ExpectOwnNeff(calls[j], expected);
  }
}

TEST_F(NeffccTest, TheThreeOptlevelSpellingsAreOneKey) {
  const std::vector<std::vector<std::string>> spellings = {
      {"-O", "2"}, {"-O2"}, {"--optlevel", "2"}, {"--optlevel=2"}};
  std::string first;
  for (const auto& spelling : spellings) {
    Call call = NewCall("0202");
    CommandResult r = RunCommand(Argv(call, spelling), Env());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    if (first.empty()) first = ReadFile(call.output);
    ExpectOwnNeff(call, first);
    EXPECT_TRUE(ReadFile(call.output) == Reference(call, spelling));
  }
  EXPECT_EQ(Runs(), 1);
}

TEST_F(NeffccTest, AnUncacheableCompileSaysWhyInOneLineAndSucceeds) {
  for (int i = 0; i < 2; ++i) {
    Call call = NewCall("5a5e");
    CommandResult r = RunCommand(
        FormArgv(call, {"compile", "--framework=XLA", "IN", "--pipeline",
                        "compile", "SaveTemps", "--output", "OUT"}),
        Env());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(absl::StartsWith(r.err, "neffcc: warning: --pipeline"))
        << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "running the compiler without"))
        << r.err;
    EXPECT_EQ(LastLine(r.out), "Compiler status PASS");
    EXPECT_FALSE(ReadFile(call.output).empty());
  }
  EXPECT_EQ(Runs(), 2);
  // Not a compile: nothing to cache and nothing said.
  CommandResult other =
      RunCommand({root_ + "/mask/neuronx-cc", "list-operators"}, Env());
  EXPECT_EQ(other.exit_code, 0);
  EXPECT_EQ(other.err, "");
}

// Issue 28: only verdicts are shared. Callers whose compiler dies without
// one (a signal, an exit without "Compiler status ERROR") each fail alone,
// concurrent waiters compile again, and nothing is recorded.
TEST_F(NeffccTest, ACompilerDyingWithoutAVerdictIsCompiledAgain) {
  for (const char* death :
       {"FAKE_NEURONX_CC_CRASH=1", "FAKE_NEURONX_CC_NO_VERDICT=1"}) {
    const int before = Runs();
    std::vector<std::unique_ptr<Process>> processes;
    for (int i = 0; i < 3; ++i) {
      processes.push_back(std::make_unique<Process>(
          Argv(NewCall("d1ed")), Env({death, "FAKE_NEURONX_CC_SLEEP_MS=200"})));
    }
    for (auto& p : processes) {
      EXPECT_EQ(p->Wait(), 137) << death << ": " << p->Stderr();
      EXPECT_FALSE(absl::StrContains(p->Stderr(),
                                     "failed to compile in "
                                     "another process"))
          << p->Stderr();
    }
    EXPECT_EQ(Runs() - before, 3) << death;  // each caller compiled itself
    Call next = NewCall("d1ed");
    CommandResult r = RunCommand(Argv(next), Env());
    ASSERT_EQ(r.exit_code, 0) << death << ": " << r.err;
    ExpectOwnNeff(next, Reference(next));
    EXPECT_EQ(Runs() - before, 4) << death;
    // Cached now; the next death test needs a fresh graph.
    ASSERT_EQ(RunNeffctl(*daemon_, {"evict", "neff", OnlyKey(),
                                    "--compiler_version", kVersion})
                  .exit_code,
              0);
  }
}

// A recorded failure (a verdict) is served until `neffctl forget` drops it.
TEST_F(NeffccTest, ForgetDropsARecordedFailure) {
  Call call = NewCall("f0f0");
  WriteFile(call.input, "HloModule FAIL_THIS_GRAPH f0f0\n");
  EXPECT_EQ(RunCommand(Argv(call), Env()).exit_code, 70);
  EXPECT_EQ(RunCommand(Argv(call), Env()).exit_code, 70);
  EXPECT_EQ(Runs(), 1);
  const std::string key = OnlyKey();
  CommandResult forgot = RunNeffctl(
      *daemon_, {"forget", "neff", key, "--compiler_version", kVersion});
  ASSERT_EQ(forgot.exit_code, 0) << forgot.err;
  EXPECT_EQ(forgot.out, absl::StrCat("forgot the recorded failure of neff/",
                                     kVersion, "/", key, "\n"));
  // Forgotten: the next caller compiles (and fails) again.
  EXPECT_EQ(RunCommand(Argv(call), Env()).exit_code, 70);
  EXPECT_EQ(Runs(), 2);
  // A cached entry is not a failure: forget refuses it and leaves it.
  Call good = NewCall("f1f1");
  ASSERT_EQ(RunCommand(Argv(good), Env()).exit_code, 0);
  CommandResult refused = RunNeffctl(
      *daemon_,
      {"forget", "neff", KeyOf(good), "--compiler_version", kVersion});
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_TRUE(absl::StrContains(refused.err, "not a recorded failure"))
      << refused.err;
  EXPECT_EQ(RunCommand(Argv(NewCall("f1f1")), Env()).exit_code, 0);
  EXPECT_EQ(Runs(), 3);
}

// Issue 28: a wrapper compile's result is the NEFF and wrapped_neff.hlo in
// the working directory; every caller, each in its own directory, gets both
// byte for byte, from one compile.
TEST_F(NeffccTest, AWrapperCompileGivesEveryCallerItsWholeResult) {
  const std::vector<std::string> wrapper = {"--enable-internal-neff-wrapper"};
  Call reference_call = NewCall("3a3a");
  CommandResult reference = RunCommand(
      InDir(DirOf(reference_call.input),
            {Runfile("tests/fake_neuronx_cc"), "--target=trn1", "compile",
             "--framework=XLA", reference_call.input, "--output",
             reference_call.output, "--enable-internal-neff-wrapper"}),
      {"FAKE_NEURONX_CC_RUNS=/dev/null"});
  ASSERT_EQ(reference.exit_code, 0) << reference.err;
  const std::string neff = ReadFile(reference_call.output);
  const std::string wrapped =
      ReadFile(DirOf(reference_call.input) + "/wrapped_neff.hlo");
  ASSERT_FALSE(wrapped.empty());

  for (int round = 0; round < 2; ++round) {  // compiled, then a hit
    std::vector<Call> calls;
    std::vector<std::unique_ptr<Process>> processes;
    for (int i = 0; i < 3; ++i) {
      calls.push_back(NewCall("3a3a"));
      processes.push_back(std::make_unique<Process>(
          InDir(
              DirOf(calls.back().input),
              FormArgv(calls.back(),
                       {"--target=trn1", "compile", "--framework", "XLA", "IN",
                        "--output", "OUT", "--enable-internal-neff-wrapper"})),
          Env({"FAKE_NEURONX_CC_SLEEP_MS=300"})));
    }
    for (size_t i = 0; i < calls.size(); ++i) {
      ASSERT_EQ(processes[i]->Wait(), 0) << processes[i]->Stderr();
      ExpectOwnNeff(calls[i], neff);
      const std::string side = DirOf(calls[i].input) + "/wrapped_neff.hlo";
      EXPECT_TRUE(ReadFile(side) == wrapped) << side;
    }
    EXPECT_EQ(Runs(), 1) << "round " << round;
  }
  // The same graph without the wrapper is another result: only a NEFF.
  Call plain = NewCall("3a3a");
  ASSERT_EQ(RunCommand(InDir(DirOf(plain.input), Argv(plain)), Env()).exit_code,
            0);
  EXPECT_FALSE(
      std::filesystem::exists(DirOf(plain.input) + "/wrapped_neff.hlo"));
  EXPECT_EQ(Runs(), 2);
}

// A result neffcc cannot capture (here a directory the compiler leaves in its
// working directory) is the caller's, with one line, and never cached.
TEST_F(NeffccTest, AResultThatCannotBeCapturedIsNotCached) {
  for (int i = 0; i < 2; ++i) {
    Call call = NewCall("4d4d");
    CommandResult r = RunCommand(InDir(DirOf(call.input), Argv(call)),
                                 Env({"FAKE_NEURONX_CC_TEMP_DIR=1"}));
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "neuroncc_temps")) << r.err;
    ExpectOwnNeff(call, Reference(call));
    EXPECT_TRUE(
        std::filesystem::is_directory(DirOf(call.input) + "/neuroncc_temps"));
  }
  EXPECT_EQ(Runs(), 2);
}

}  // namespace
}  // namespace neffd::test_support
