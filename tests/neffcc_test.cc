// neffcc masquerading as neuronx-cc (issue 17), end to end: a directory early
// on PATH holds a neuronx-cc symlink to the real //client:neffcc, the real
// compiler later on PATH is tests/fake_neuronx_cc (which counts its
// compiles), and a real neffd from the harness serves the cache. Calls are
// made the way libneuronxla makes them, each in its own work directory.
#include <signal.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/explain.h"
#include "gtest/gtest.h"
#include "tests/neffcc_fixture.h"

namespace neffd::test_support {
namespace {

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
  int records = 0;
  for (const std::string& key : Keys()) {
    absl::StatusOr<v1::KeyInputsRecord> record =
        KeyInputsFromJson(ReadFile(FilesOf(root_ + "/neff", key).key_inputs));
    ASSERT_TRUE(record.ok()) << key;
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

}  // namespace
}  // namespace neffd::test_support
