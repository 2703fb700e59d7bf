// Runs the real neuronx-env binary, as a job launch script would.

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "config/env.h"
#include "config/json_testing.h"
#include "config/render.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

extern char** environ;

namespace neffd::config {
namespace {

using ::testing::AnyOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string Binary() {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/",
                      std::getenv("TEST_WORKSPACE"), "/config/neuronx-env");
}

std::string ReadFile(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

// Runs `env -i VARS... neuronx-env ARGS...`: the binary sees only `vars`.
Result RunClean(const std::vector<std::string>& vars,
                const std::vector<std::string>& args) {
  static int calls = 0;
  const std::string base = absl::StrCat(::testing::TempDir(), "/run", ++calls);
  const std::string out_path = base + ".out";
  const std::string err_path = base + ".err";
  std::vector<std::string> argv = {"/usr/bin/env", "-i"};
  argv.insert(argv.end(), vars.begin(), vars.end());
  argv.push_back(Binary());
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> c_argv;
  for (std::string& arg : argv) c_argv.push_back(arg.data());
  c_argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  Result result;
  pid_t pid = 0;
  int spawn_error = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr,
                                c_argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawn_error != 0) {
    ADD_FAILURE() << "posix_spawn: " << spawn_error;
    return result;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  return result;
}

// Acceptance: `env -i TORCH_NEURONX_LOG_LEVEL=7
// TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT=60 neuronx-env --json`.
TEST(NeuronxEnv, JsonInACleanEnvironment) {
  Result run = RunClean(
      {"TORCH_NEURONX_LOG_LEVEL=7", "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT=60"},
      {"--json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  google::protobuf::Struct root = ParseJson(run.out);

  const auto& log_level = VariableOf(root, "TORCH_NEURONX_LOG_LEVEL").fields();
  EXPECT_EQ(log_level.at("value").number_value(), 1);
  EXPECT_EQ(log_level.at("origin").string_value(), "invalid");
  const auto& timeout =
      VariableOf(root, "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT").fields();
  EXPECT_EQ(timeout.at("value").number_value(), 60);
  EXPECT_EQ(timeout.at("origin").string_value(), "env");

  const auto& warnings = root.fields().at("warnings").list_value();
  ASSERT_EQ(warnings.values_size(), 1);
  EXPECT_THAT(warnings.values(0).string_value(),
              HasSubstr("TORCH_NEURONX_LOG_LEVEL=\"7\" is invalid"));
  EXPECT_THAT(run.err, HasSubstr("TORCH_NEURONX_LOG_LEVEL=\"7\" is invalid"));

  // Every other variable is at its default: what an empty environment gives
  // on this host (same user, uid and instance as the child).
  google::protobuf::Struct defaults =
      ParseJson(*RenderJson(EnvSnapshot::FromMap({})));
  const auto& variables = root.fields().at("variables").struct_value();
  EXPECT_EQ(variables.fields_size(), static_cast<int>(Variables().size()));
  for (const VarSpec& spec : Variables()) {
    const std::string name = spec.name;
    if (name == "TORCH_NEURONX_LOG_LEVEL" ||
        name == "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT") {
      continue;
    }
    SCOPED_TRACE(name);
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(
        VariableOf(root, name), VariableOf(defaults, name)));
    EXPECT_THAT(VariableOf(root, name).fields().at("origin").string_value(),
                AnyOf("default", "derived"));
  }
}

// Acceptance: `neuronx-env --check` exits 0 in a clean environment.
TEST(NeuronxEnv, CheckPassesInACleanEnvironment) {
  Result run = RunClean({}, {"--check"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, IsEmpty());
  EXPECT_THAT(run.err, IsEmpty());
}

// Acceptance: and 1 with a typo, suggesting the right name.
TEST(NeuronxEnv, CheckFailsOnATypo) {
  Result run = RunClean({"TORCH_NEURONX_NEFF_CACHE_DIRR=/x"}, {"--check"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err,
              HasSubstr("unknown variable TORCH_NEURONX_NEFF_CACHE_DIRR; did "
                        "you mean TORCH_NEURONX_NEFF_CACHE_DIR?"));
}

TEST(NeuronxEnv, CheckFailsOnAnInvalidValue) {
  Result run = RunClean({"TORCH_NEURONX_ENABLE_STREAMS=true"}, {"--check"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("TORCH_NEURONX_ENABLE_STREAMS=\"true\""));
}

TEST(NeuronxEnv, TableOnStdoutWarningsOnStderr) {
  Result run = RunClean({"TORCH_NEURONX_LOG_LEVEL=x"}, {});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_THAT(run.out, HasSubstr("NAME"));
  EXPECT_THAT(run.out, HasSubstr("TORCH_NEURONX_LOG_LEVEL"));
  EXPECT_THAT(run.out, ::testing::Not(HasSubstr("warning")));
  EXPECT_THAT(run.err, HasSubstr("warning: TORCH_NEURONX_LOG_LEVEL=\"x\""));
}

TEST(NeuronxEnv, Explain) {
  Result run = RunClean({"TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT=60"},
                        {"--explain", "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"});
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("Seconds to wait for the per-key compile"));
  EXPECT_THAT(run.out, HasSubstr("value:      60 (env)"));

  Result typo = RunClean({}, {"--explain=TORCH_NEURONX_LOG_LEVL"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_THAT(typo.err, HasSubstr("did you mean TORCH_NEURONX_LOG_LEVEL?"));
}

TEST(NeuronxEnv, TorchVersion) {
  Result run = RunClean({}, {"--json", "--torch_version", "2.13"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const google::protobuf::Struct root = ParseJson(run.out);
  const auto& variable = VariableOf(root, "TORCH_NEURONX_COMPLEX_DECOMPOSE");
  EXPECT_TRUE(variable.fields().at("value").bool_value());
  EXPECT_EQ(variable.fields().at("origin").string_value(), "derived");

  Result bad = RunClean({}, {"--torch_version=two"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_THAT(bad.err, HasSubstr("--torch_version"));
}

TEST(NeuronxEnv, PlatformFromAnInstanceFile) {
  std::string path = absl::StrCat(::testing::TempDir(), "/product_name");
  std::ofstream(path) << "trn2.48xlarge\n";
  Result run = RunClean({}, {"--json", "--product_name_file=" + path});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const google::protobuf::Struct root = ParseJson(run.out);
  EXPECT_EQ(VariableOf(root, "NEURON_PLATFORM_TARGET_OVERRIDE")
                .fields()
                .at("value")
                .string_value(),
            "trn2");
}

TEST(NeuronxEnv, Markdown) {
  Result run = RunClean({}, {"--markdown"});
  EXPECT_EQ(run.exit_code, 0);
  EXPECT_EQ(run.out, RenderMarkdown());
}

TEST(NeuronxEnv, UsageErrors) {
  EXPECT_EQ(RunClean({}, {"--json", "--markdown"}).exit_code, 2);
  EXPECT_EQ(RunClean({}, {"stray"}).exit_code, 2);
}

}  // namespace
}  // namespace neffd::config
