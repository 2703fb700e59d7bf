// neffcc's pieces on their own: the command line and the key's flags, the
// real compiler's resolution through symlinks, its version and the version
// cache (with real scripts on a real filesystem).
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/neffcc/command_line.h"
#include "client/neffcc/compile_flow.h"
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
              ElementsAre("--target=trn1", "--framework=XLA", "-O2"));
}

TEST(CommandLineTest, SpaceAndEqualsFormsGiveTheSameFlags) {
  auto spaced = ParseCompile(
      Args({"compile", "--target", "trn2", "--verbose", "35", "in.pb",
            "--workdir", "/w1", "--output=o.neff", "--model-type", "llm"}));
  auto joined = ParseCompile(
      Args({"compile", "--target=trn2", "--verbose=info", "in.pb",
            "--workdir=/w2", "--output", "p.neff", "--model-type=llm"}));
  ASSERT_TRUE(spaced.ok()) << spaced.status();
  ASSERT_TRUE(joined.ok()) << joined.status();
  EXPECT_EQ(spaced->key_flags, joined->key_flags);
  EXPECT_THAT(spaced->key_flags,
              ElementsAre("--target=trn2", "--model-type=llm"));
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
}

TEST(CommandLineTest, WhatIsNotACacheableCompile) {
  EXPECT_FALSE(ParseCompile(Args({"--version"})).ok());
  EXPECT_FALSE(ParseCompile(Args({"list-operators", "--framework=XLA"})).ok());
  EXPECT_FALSE(ParseCompile(Args({"compile", "in.pb"})).ok());  // no output
  EXPECT_FALSE(
      ParseCompile(Args({"compile", "a.pb", "b.pb", "--output", "o"})).ok());
  EXPECT_FALSE(ParseCompile(Args({"compile", "--output", "o"})).ok());
}

TEST(CommandLineTest, WithOutputRewritesBothForms) {
  EXPECT_THAT(WithOutput(Args({"compile", "in", "--output", "a", "-O1"}), "/j"),
              ElementsAre("compile", "in", "--output", "/j", "-O1"));
  EXPECT_THAT(WithOutput(Args({"compile", "in", "--output=a"}), "/j"),
              ElementsAre("compile", "in", "--output=/j"));
}

TEST(FailureLogTest, ExitStatusRoundTrips) {
  EXPECT_EQ(ExitStatusOfFailureLog(
                absl::StrCat(kExitStatusLine, "70\nERROR: bad op\n")),
            70);
  EXPECT_EQ(ExitStatusOfFailureLog("ERROR: from another client"), 1);
  EXPECT_EQ(ExitStatusOfFailureLog(absl::StrCat(kExitStatusLine, "x\n")), 1);
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
