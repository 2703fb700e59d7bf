// neffcc as faithful as the compiler (issue 28), end to end with the fixture
// of tests/neffcc_fixture.h: every call form, whole results (side outputs),
// only verdicts shared, and libneuronxla caches imported by neffctl.
#include <signal.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/neffcc_fixture.h"

namespace neffd::test_support {
namespace {

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

// A libneuronxla cache as libneuronxla leaves it, built with the stand-in
// compiler: one MODULE_ directory per graph, compiled in that directory.
class LibneuronxlaCacheTest : public NeffccTest {
 protected:
  std::string cache() const { return root_ + "/libneuronxla"; }

  enum class Ending { kDone, kNoDone };
  // The entry's directory; `graph` holding FAIL_THIS_GRAPH fails its compile
  // (model.log, no NEFF), as libneuronxla records a failure.
  std::string AddEntry(const std::string& graph,
                       const std::vector<std::string>& flags,
                       Ending ending = Ending::kDone) {
    const std::string dir =
        absl::StrCat(cache(), "/", kVersionDir, "/MODULE_", graph, "+4fd1c");
    std::filesystem::create_directories(dir);
    WriteFile(dir + "/model.hlo_module.pb",
              absl::StrCat("HloModule ", graph, "\n"));
    std::string json = "[";
    for (const std::string& flag : flags) {
      absl::StrAppend(&json, json.size() > 1 ? ", " : "", "\"", flag, "\"");
    }
    WriteFile(dir + "/compile_flags.json", json + "]");
    std::vector<std::string> argv = {Runfile("tests/fake_neuronx_cc"),
                                     "compile",
                                     "--framework=XLA",
                                     "model.hlo_module.pb",
                                     "--output",
                                     "model.neff"};
    argv.insert(argv.end(), flags.begin(), flags.end());
    CommandResult r =
        RunCommand(InDir(dir, argv), {"FAKE_NEURONX_CC_RUNS=/dev/null"});
    if (r.exit_code != 0) {
      WriteFile(dir + "/model.log", r.out + r.err);
    } else if (ending == Ending::kDone) {
      WriteFile(dir + "/model.done", "");
    }
    return dir;
  }

  CommandResult Import() {
    std::vector<std::string> argv = daemon_->NeffctlArgv();
    argv.insert(argv.end(), {"import", cache()});
    return RunCommand(argv, Env());
  }
};

TEST_F(LibneuronxlaCacheTest, ImportedEntriesAreNeffccHitsWithTheSameBytes) {
  const std::string plain = AddEntry("1b1b", {"--target=trn1"});
  const std::string wrapped =
      AddEntry("2b2b", {"--target=trn1", "--enable-internal-neff-wrapper"});
  const std::string failed = AddEntry("FAIL_THIS_GRAPH", {"--target=trn1"});
  const std::string half = AddEntry("4b4b", {"--target=trn1"}, Ending::kNoDone);
  ASSERT_TRUE(std::filesystem::exists(wrapped + "/wrapped_neff.hlo"));
  ASSERT_TRUE(std::filesystem::exists(failed + "/model.log"));

  CommandResult imported = Import();
  ASSERT_EQ(imported.exit_code, 0) << imported.out << imported.err;
  EXPECT_TRUE(absl::StrContains(
      imported.out,
      "scanned 4 entries: 2 imported, 0 cached already, 1 failed and 1 "
      "incomplete (skipped)"))
      << imported.out;
  EXPECT_TRUE(absl::StrContains(
      imported.err, "skipped " + failed + ": a failed compile (model.log)"))
      << imported.err;
  EXPECT_TRUE(absl::StrContains(imported.err, "skipped " + half +
                                                  ": incomplete (no "
                                                  "model.done)"))
      << imported.err;

  // libneuronxla's own call form through neffcc: hits, with the same bytes.
  for (const auto& [graph, dir] :
       {std::pair<std::string, std::string>{"1b1b", plain},
        {"2b2b", wrapped}}) {
    Call call = NewCall(graph);
    std::vector<std::string> form = {
        "--target=trn1", "compile", "--framework", "XLA", "IN",
        "--output",      "OUT"};
    if (dir == wrapped) form.push_back("--enable-internal-neff-wrapper");
    CommandResult r =
        RunCommand(InDir(DirOf(call.input), FormArgv(call, form)), Env());
    ASSERT_EQ(r.exit_code, 0) << r.err;
    ExpectOwnNeff(call, ReadFile(dir + "/model.neff"));
    if (dir == wrapped) {
      EXPECT_TRUE(ReadFile(DirOf(call.input) + "/wrapped_neff.hlo") ==
                  ReadFile(dir + "/wrapped_neff.hlo"));
    }
  }
  EXPECT_EQ(Runs(), 0);

  // Again: nothing new; the skipped entries are still reported.
  CommandResult again = Import();
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(absl::StrContains(again.out, "0 imported, 2 cached already"))
      << again.out;
  // The half-written entry was left alone, and neffcc compiles that graph.
  EXPECT_FALSE(std::filesystem::exists(half + "/model.done"));
  ASSERT_EQ(RunCommand(Argv(NewCall("4b4b")), Env()).exit_code, 0);
  EXPECT_EQ(Runs(), 1);
}

}  // namespace
}  // namespace neffd::test_support
