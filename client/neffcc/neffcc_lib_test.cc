// neffcc's pieces on their own: the command line and the key's flags, the
// real compiler's resolution through symlinks, its version and the version
// cache (with real scripts on a real filesystem).
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/neffcc/command_line.h"
#include "client/neffcc/compile_flow.h"
#include "client/neffcc/outputs.h"
#include "client/neffcc/real_compiler.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "store/file_util.h"
#include "tests/harness/temp_dir.h"

namespace neffd::neffcc {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Args(std::initializer_list<const char*> args) {
  return std::vector<std::string>(args.begin(), args.end());
}

TEST(CommandLineTest, MasqueradeAndExplicitForms) {
  auto masquerade =
      ParseNeffccArgs(Args({"/opt/mask/neuronx-cc", "--version"}));
  ASSERT_TRUE(masquerade.ok());
  EXPECT_EQ(masquerade->explicit_compiler, "");
  EXPECT_THAT(masquerade->compiler_args, ElementsAre("--version"));

  auto by_name = ParseNeffccArgs(Args({"neffcc", "neuronx-cc", "compile"}));
  ASSERT_TRUE(by_name.ok());
  EXPECT_EQ(by_name->explicit_compiler, "");
  EXPECT_THAT(by_name->compiler_args, ElementsAre("compile"));

  auto by_path = ParseNeffccArgs(Args({"neffcc", "/usr/bin/neuronx-cc", "-h"}));
  ASSERT_TRUE(by_path.ok());
  EXPECT_EQ(by_path->explicit_compiler, "/usr/bin/neuronx-cc");

  EXPECT_FALSE(ParseNeffccArgs(Args({"neffcc"})).ok());
  EXPECT_FALSE(ParseNeffccArgs(Args({"neffcc", "gcc", "-c"})).ok());
}

TEST(CommandLineTest, LibneuronxlaCompileKeysOnlyCodeChangingFlags) {
  auto command = ParseCompile(Args(
      {"compile", "--target=trn1", "--framework=XLA",
       "/tmp/w/model.MODULE_1+2.hlo_module.pb", "--output", "/tmp/w/out.neff",
       "--verbose=35", "--logfile", "/tmp/w/log.txt", "-O2"}));
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(command->input, "/tmp/w/model.MODULE_1+2.hlo_module.pb");
  EXPECT_EQ(command->output, "/tmp/w/out.neff");
  EXPECT_EQ(command->target, "trn1");
  EXPECT_THAT(command->key_flags,
              ElementsAre("--framework=XLA", "--optlevel=2", "--target=trn1"));
}

// Every spelling of one setting, and every place an option may stand, gives
// the flags of the first.
TEST(CommandLineTest, EquivalentSpellingsGiveTheSameFlags) {
  const std::vector<std::vector<std::string>> forms = {
      Args({"compile", "--target=trn1", "--framework=XLA", "in.pb", "--output",
            "o.neff", "-O2", "--lnc=2"}),
      Args({"--target=trn1", "compile", "--framework", "XLA", "in.pb",
            "--output", "o.neff", "-O", "2", "--lnc", "2"}),
      Args({"--target", "trn1", "compile", "--framework", "XLA", "in.pb",
            "--output=p.neff", "--optlevel", "2", "--logical-nc-config", "2",
            "--verbose", "35"}),
      Args({"compile", "in.pb", "--optlevel=2", "--logical-nc-config=2",
            "--framework=XLA", "--workdir", "/w", "--target", "trn1",
            "--output", "q.neff"}),
  };
  std::vector<std::string> first;
  for (const auto& form : forms) {
    auto command = ParseCompile(form);
    ASSERT_TRUE(command.ok()) << command.status();
    EXPECT_EQ(command->input, "in.pb");
    EXPECT_EQ(command->target, "trn1");
    if (first.empty()) first = command->key_flags;
    EXPECT_EQ(command->key_flags, first);
  }
  EXPECT_THAT(first, ElementsAre("--framework=XLA", "--lnc=2", "--optlevel=2",
                                 "--target=trn1"));
}

TEST(CommandLineTest, MultiValueAndBareOptions) {
  auto command = ParseCompile(Args(
      {"compile", "--framework", "XLA", "--pipeline", "compile", "Frontend",
       "--enable-internal-neff-wrapper", "in.pb", "--output", "o.neff"}));
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_EQ(command->input, "in.pb");
  EXPECT_TRUE(command->wants_wrapper);
  EXPECT_THAT(command->key_flags,
              ElementsAre("--enable-internal-neff-wrapper", "--framework=XLA",
                          "--pipeline=compile Frontend"));
}

TEST(CommandLineTest, UnknownFlagsAreKeyed) {
  // A value after an unknown flag is its value when the input is known...
  auto valued = ParseCompile(
      Args({"compile", "--new-knob", "7", "in.pb", "--output", "o"}));
  ASSERT_TRUE(valued.ok()) << valued.status();
  EXPECT_EQ(valued->input, "in.pb");
  EXPECT_THAT(valued->key_flags, ElementsAre("--new-knob=7"));
  // ... and the input when nothing else can be.
  auto bare = ParseCompile(
      Args({"compile", "--enable-fast-thing", "in.pb", "--output", "o"}));
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_EQ(bare->input, "in.pb");
  EXPECT_THAT(bare->key_flags, ElementsAre("--enable-fast-thing"));
  // Before the subcommand, "compile" is never a value.
  auto global = ParseCompile(
      Args({"--global-knob", "compile", "in.pb", "--output", "o"}));
  ASSERT_TRUE(global.ok()) << global.status();
  EXPECT_THAT(global->key_flags, ElementsAre("--global-knob"));
}

TEST(CommandLineTest, WhatIsNotACacheableCompile) {
  EXPECT_TRUE(IsNotACompile(ParseCompile(Args({"--version"})).status()));
  EXPECT_TRUE(IsNotACompile(
      ParseCompile(Args({"list-operators", "--framework=XLA"})).status()));
  EXPECT_TRUE(IsNotACompile(
      ParseCompile(Args({"--target", "trn1", "list-operators"})).status()));
  for (const auto& args :
       {Args({"compile", "in.pb"}),  // no output
        Args({"compile", "a.pb", "b.pb", "--output", "o"}),
        Args({"compile", "--output", "o"}),
        Args({"compile", "in.pb", "--output", "o", "--help"}),
        Args({"compile", "--pipeline", "compile", "SaveTemps", "--output", "o",
              "--framework=XLA", "in.pb"})}) {
    absl::Status status = ParseCompile(args).status();
    EXPECT_TRUE(absl::IsFailedPrecondition(status)) << status;
    EXPECT_FALSE(IsNotACompile(status)) << status;
    EXPECT_EQ(status.message().find('\n'), absl::string_view::npos);
  }
}

TEST(CommandLineTest, RunnableArgsPlacesTheOutputAndAnchorsRelativePaths) {
  auto args = Args({"--target=trn1", "compile", "in.pb", "--output", "a",
                    "--logfile=log.txt", "--workdir", "/abs", "-O1"});
  auto command = ParseCompile(args);
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_THAT(RunnableArgs(args, *command, "/j/out.neff", "/cwd"),
              ElementsAre("--target=trn1", "compile", "/cwd/in.pb", "--output",
                          "/j/out.neff", "--logfile=/cwd/log.txt", "--workdir",
                          "/abs", "-O1"));
  auto joined = Args({"compile", "/in.pb", "--output=a"});
  command = ParseCompile(joined);
  ASSERT_TRUE(command.ok()) << command.status();
  EXPECT_THAT(RunnableArgs(joined, *command, "/j", "/cwd"),
              ElementsAre("compile", "/in.pb", "--output=/j"));
}

TEST(FailureLogTest, ExitStatusRoundTrips) {
  EXPECT_EQ(ExitStatusOfFailureLog(
                absl::StrCat(kExitStatusLine, "70\nERROR: bad op\n")),
            70);
  EXPECT_EQ(ExitStatusOfFailureLog("ERROR: from another client"), 1);
  EXPECT_EQ(ExitStatusOfFailureLog(absl::StrCat(kExitStatusLine, "x\n")), 1);
}

TEST(VerdictTest, OnlyACompilerThatSaysErrorIsAFailure) {
  EXPECT_EQ(Verdict(W_EXITCODE(0, 0), "Compiler status PASS\n").kind,
            CompileResult::Kind::kOk);
  CompileResult failed =
      Verdict(W_EXITCODE(70, 0), "ERROR: bad op\nCompiler status ERROR\n");
  EXPECT_EQ(failed.kind, CompileResult::Kind::kCompilerError);
  EXPECT_EQ(ExitStatusOfFailureLog(failed.log), 70);
  EXPECT_EQ(Verdict(W_EXITCODE(137, 0), "Killed\n").kind,
            CompileResult::Kind::kCancelled);
  EXPECT_EQ(Verdict(W_EXITCODE(1, 0), "ERROR: cannot write out.neff\n").kind,
            CompileResult::Kind::kCancelled);
  EXPECT_EQ(Verdict(W_EXITCODE(0, SIGKILL), "Compiler status ERROR\n").kind,
            CompileResult::Kind::kCancelled);
}

class OutputsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir();
    for (const char* dir : {"/cwd", "/out", "/caller", "/caller/o"}) {
      ASSERT_TRUE(MakeDirs(root_ + dir).ok());
    }
  }
  void Write(const std::string& path, const std::string& bytes) {
    std::ofstream(root_ + path, std::ios::binary) << bytes;
  }
  std::string Read(const std::string& path) {
    std::ifstream in(root_ + path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  std::string root_;
};

TEST_F(OutputsTest, ABundleRecreatesEveryOutputWhereTheCompilerWroteIt) {
  Write("/out/m.neff", std::string(5000, 'N'));
  Write("/out/m.json", "{}");
  Write("/cwd/wrapped_neff.hlo", "HloModule wrapped\n");
  Write("/cwd/log-neuron-cc.txt", "a log, not a result\n");
  auto sides = CollectSideOutputs(root_ + "/cwd", root_ + "/out", "m.neff");
  ASSERT_TRUE(sides.ok()) << sides.status();
  ASSERT_EQ(sides->size(), 2u);
  ASSERT_TRUE(
      WriteArtifact(root_ + "/out/m.neff", *sides, root_ + "/artifact").ok());
  ASSERT_TRUE(PlaceResult(root_ + "/artifact", root_ + "/caller/o/x.neff",
                          root_ + "/caller")
                  .ok());
  EXPECT_EQ(Read("/caller/o/x.neff"), std::string(5000, 'N'));
  EXPECT_EQ(Read("/caller/o/m.json"), "{}");
  EXPECT_EQ(Read("/caller/wrapped_neff.hlo"), "HloModule wrapped\n");
  EXPECT_EQ(access((root_ + "/caller/log-neuron-cc.txt").c_str(), F_OK), -1);
}

TEST_F(OutputsTest, APlainNeffStaysAPlainNeff) {
  Write("/out/m.neff", "NEFF bytes");
  auto sides = CollectSideOutputs(root_ + "/cwd", root_ + "/out", "m.neff");
  ASSERT_TRUE(sides.ok()) << sides.status();
  EXPECT_TRUE(sides->empty());
  ASSERT_TRUE(
      WriteArtifact(root_ + "/out/m.neff", *sides, root_ + "/artifact").ok());
  EXPECT_EQ(Read("/artifact"), "NEFF bytes");
  ASSERT_TRUE(
      PlaceResult(root_ + "/artifact", root_ + "/caller/x", root_ + "/caller")
          .ok());
  EXPECT_EQ(Read("/caller/x"), "NEFF bytes");
}

TEST_F(OutputsTest, WhatCannotBeCaptured) {
  ASSERT_TRUE(MakeDirs(root_ + "/cwd/temps").ok());
  auto dir = CollectSideOutputs(root_ + "/cwd", root_ + "/out", "m.neff");
  EXPECT_TRUE(absl::IsFailedPrecondition(dir.status())) << dir.status();
  rmdir((root_ + "/cwd/temps").c_str());
  for (size_t i = 0; i <= kMaxSideOutputs; ++i) {
    Write(absl::StrCat("/cwd/side", i), "x");
  }
  auto many = CollectSideOutputs(root_ + "/cwd", root_ + "/out", "m.neff");
  EXPECT_TRUE(absl::IsFailedPrecondition(many.status())) << many.status();
  // A damaged bundle is an error, never a NEFF.
  Write("/artifact", "NEFFCC-BUNDLE 1\n99 output\n\nshort");
  EXPECT_FALSE(
      PlaceResult(root_ + "/artifact", root_ + "/caller/x", root_ + "/caller")
          .ok());
}

class RealCompilerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir();
    ASSERT_TRUE(MakeDirs(root_ + "/mask").ok());
    ASSERT_TRUE(MakeDirs(root_ + "/real").ok());
  }

  // An executable script at `path` that prints `version` and appends a line
  // to {root}/asked each time it runs.
  void WriteCompiler(const std::string& path, const std::string& version) {
    std::ofstream(path) << "#!/bin/sh\necho x >> " << root_
                        << "/asked\necho 'NeuronX Compiler version " << version
                        << "'\n";
    ASSERT_EQ(chmod(path.c_str(), 0755), 0);
  }

  int TimesAsked() {
    std::ifstream in(root_ + "/asked");
    std::string line;
    int n = 0;
    while (std::getline(in, line)) ++n;
    return n;
  }

  std::string root_;
};

TEST_F(RealCompilerTest, SkipsEveryPathThatResolvesToItself) {
  // self is a file reached through a chain of symlinks in two directories.
  const std::string self = root_ + "/neffcc";
  std::ofstream(self) << "#!/bin/sh\n";
  ASSERT_EQ(chmod(self.c_str(), 0755), 0);
  ASSERT_EQ(symlink(self.c_str(), (root_ + "/link").c_str()), 0);
  ASSERT_EQ(
      symlink((root_ + "/link").c_str(), (root_ + "/mask/neuronx-cc").c_str()),
      0);
  const std::string path_env = absl::StrCat(root_, "/mask:", root_, "/real");
  absl::StatusOr<std::string> none =
      FindRealCompiler("", "neuronx-cc", path_env, self);
  EXPECT_TRUE(absl::IsNotFound(none.status())) << none.status();
  EXPECT_TRUE(absl::StrContains(none.status().message(),
                                "every one found is neffcc itself"))
      << none.status();
  const absl::Status nothing =
      FindRealCompiler("", "neuronx-cc", root_ + "/real", self).status();
  EXPECT_TRUE(absl::StartsWith(nothing.message(), "no neuronx-cc on PATH;"))
      << nothing;
  EXPECT_FALSE(
      FindRealCompiler(root_ + "/mask/neuronx-cc", "neuronx-cc", path_env, self)
          .ok());

  WriteCompiler(root_ + "/real/neuronx-cc", "2.19.8089.0+8ab9f450");
  absl::StatusOr<std::string> found =
      FindRealCompiler("", "neuronx-cc", path_env, self);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(*found, root_ + "/real/neuronx-cc");
}

TEST_F(RealCompilerTest, VersionIsAskedOnceUntilTheCompilerChanges) {
  const std::string compiler = root_ + "/real/neuronx-cc";
  WriteCompiler(compiler, "2.19.8089.0+8ab9f450");
  const std::string cache = root_ + "/versions";
  EXPECT_EQ(CompilerVersion(compiler, cache).value_or(""),
            "2.19.8089.0+8ab9f450");
  EXPECT_EQ(CompilerVersion(compiler, cache).value_or(""),
            "2.19.8089.0+8ab9f450");
  EXPECT_EQ(TimesAsked(), 1);

  // An upgrade in place changes size and mtime.
  WriteCompiler(compiler, "2.20.1.0");
  EXPECT_EQ(CompilerVersion(compiler, cache).value_or(""), "2.20.1.0");
  EXPECT_EQ(TimesAsked(), 2);
}

TEST(ParseCompilerVersionTest, FirstDottedNumber) {
  EXPECT_EQ(ParseCompilerVersion("NeuronX Compiler version 2.19.8089.0+8ab\n")
                .value_or(""),
            "2.19.8089.0+8ab");
  EXPECT_EQ(ParseCompilerVersion("neuronx-cc 3 build 2.1\n").value_or(""),
            "2.1");
  EXPECT_FALSE(ParseCompilerVersion("no version here 3\n").ok());
}

}  // namespace
}  // namespace neffd::neffcc
