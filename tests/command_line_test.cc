// The command lines of the real binaries: `neffd --help` and `neffctl
// --help` are complete and exit 0, a bad flag value is one line naming the
// flag and exit 2, durations are taken in both forms operators type, and
// each binary's version is the VERSION file's.
#include <algorithm>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "config/version.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "tests/harness/process.h"

namespace neffd {
namespace {

using neffd::test_support::CommandResult;
using neffd::test_support::RunCommand;
using neffd::test_support::Runfile;

CommandResult Neffd(std::vector<std::string> args) {
  args.insert(args.begin(), Runfile("daemon/neffd"));
  return RunCommand(args);
}

CommandResult Neffctl(std::vector<std::string> args) {
  args.insert(args.begin(), Runfile("client/neffctl"));
  return RunCommand(args);
}

CommandResult Neffcc(std::vector<std::string> args) {
  args.insert(args.begin(), Runfile("client/neffcc"));
  return RunCommand(args);
}

int Lines(const std::string& text) {
  return static_cast<int>(std::count(text.begin(), text.end(), '\n'));
}

TEST(NeffdCommandLineTest, HelpListsEveryFlagWithDefaultAndVariable) {
  CommandResult help = Neffd({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  EXPECT_TRUE(absl::StrContains(help.out, "  --cache_dir=")) << help.out;
  EXPECT_TRUE(absl::StrContains(help.out, "$TORCH_NEURONX_NEFF_CACHE_DIR"))
      << help.out;
  EXPECT_TRUE(absl::StrContains(help.out, "(default: 30s)")) << help.out;
  // This test links the daemon's flag definitions (//daemon:flags), so the
  // registry here holds exactly the flags neffd registers.
  int daemon_flags = 0;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!absl::StartsWith(flag->Filename(), "daemon/")) continue;
    ++daemon_flags;
    EXPECT_TRUE(absl::StrContains(help.out, absl::StrCat("  --", name, "\n")) ||
                absl::StrContains(help.out, absl::StrCat("  --", name, "=")))
        << "--" << name << " is missing from neffd --help";
  }
  EXPECT_GT(daemon_flags, 20);
}

TEST(NeffdCommandLineTest, BadFlagValuesExitTwoNamingTheFlag) {
  const std::string root = neffd::test_support::NewTempDir("bad_flags");
  const std::vector<std::string> dirs = {
      "--local_dir=" + root + "/local", "--cache_dir=" + root + "/neff",
      "--hlo_cache_dir=" + root + "/hlo", "--address=unix:" + root + "/s.sock"};
  const std::pair<std::string, std::string> cases[] = {
      {"--lease_ttl=abc", "--lease_ttl: \"abc\" is not a duration"},
      {"--lease_ttl=0", "--lease_ttl: \"0\" must be positive"},
      {"--max_entry_bytes=lots", "--max_entry_bytes: \"lots\" is not"},
      {"--max_rpc_threads=1", "--max_rpc_threads: \"1\" must be between"},
      {"--v=loud", "--v: \"loud\" is not a log level"},
      {"--no_such_flag=1", "--no_such_flag: no such flag"},
      {"--remote=http://bucket/x",
       "--remote: \"http://bucket/x\" expected "
       "s3://BUCKET/PREFIX"},
      {"--remote=s3://No_Such/x", "--remote: \"s3://No_Such/x\""},
      {"--remote_mode=rx", "--remote_mode: \"rx\" must be rw or ro"},
      {"--s3_endpoint=ftp://s3", "--s3_endpoint: \"ftp://s3\" must be an"},
      {"--s3_region=Mars 1", "--s3_region: \"Mars 1\" must be a region"},
      {"--s3_timeout=0", "--s3_timeout: \"0\" must be positive"},
      {"--s3_part_size=1024", "--s3_part_size: \"1024\" must be between"},
      {"--s3_upload_concurrency=0",
       "--s3_upload_concurrency: \"0\" must be between 1 and 64"},
      {"--s3_breaker_failures=0", "--s3_breaker_failures: \"0\" must be"},
  };
  for (const auto& [flag, message] : cases) {
    std::vector<std::string> args = dirs;
    args.push_back(flag);
    CommandResult r = Neffd(args);
    EXPECT_EQ(r.exit_code, 2) << flag << ": " << r.err;
    EXPECT_TRUE(absl::StrContains(r.err, "neffd: " + message))
        << flag << ": " << r.err;
    EXPECT_EQ(Lines(r.err), 1) << flag << ": " << r.err;
  }
}

TEST(NeffdCommandLineTest, DurationsTakeBareSecondsOrUnits) {
  const std::string root = neffd::test_support::NewTempDir("durations");
  neffd::test_support::DaemonProcess daemon(
      root, {"--lease_ttl=45", "--failed_ttl=2h", "--poll_interval=0.5"});
  ASSERT_TRUE(daemon.Start());
  CommandResult config =
      Neffctl({"--address=" + daemon.address(), "--json", "config"});
  ASSERT_EQ(config.exit_code, 0) << config.err;
  for (const char* shown :
       {"\"lease_ttl\",\"value\":\"45s\"", "\"failed_ttl\",\"value\":\"2h\"",
        "\"poll_interval\",\"value\":\"500ms\""}) {
    EXPECT_TRUE(absl::StrContains(config.out, shown)) << config.out;
  }
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0);
}

// Every flag --help lists is in GetConfig, with the value the daemon runs
// with and where it came from (issue 29: a flag is declared once).
TEST(NeffdCommandLineTest, ConfigListsEveryFlagHelpListsWithItsOrigin) {
  CommandResult help = Neffd({"--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  std::vector<std::string> listed;
  for (absl::string_view line : absl::StrSplit(help.out, '\n')) {
    if (!absl::ConsumePrefix(&line, "  --")) continue;
    listed.emplace_back(line.substr(0, line.find('=')));
  }
  ASSERT_GT(listed.size(), 50u) << help.out;

  const std::string root = neffd::test_support::NewTempDir("config_flags");
  neffd::test_support::DaemonProcess daemon(
      root, {"--lease_ttl=45", "--max_cache_size=4096"},
      {"TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT=77"});
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  CommandResult json =
      Neffctl({"--address=" + daemon.address(), "--json", "config"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  v1::ConfigResponse config;
  ASSERT_TRUE(
      google::protobuf::util::JsonStringToMessage(json.out, &config).ok())
      << json.out;
  std::map<std::string, v1::ConfigValue> settings;
  for (const v1::ConfigValue& setting : config.settings()) {
    settings[setting.name()] = setting;
  }
  for (const std::string& name : listed) {
    auto it = settings.find(name);
    ASSERT_NE(it, settings.end()) << "--" << name << " is not in GetConfig";
    EXPECT_THAT(it->second.origin(), testing::AnyOf("flag", "env", "default"))
        << name;
  }
  EXPECT_EQ(settings.size(), listed.size());
  // name, value the daemon runs with, origin
  const std::vector<std::vector<std::string>> expected = {
      {"lease_ttl", "45s", "flag"},          {"max_cache_size", "4KiB", "flag"},
      {"lock_timeout", "1m17s", "env"},      {"gc_interval", "10m", "default"},
      {"s3_part_size", "16MiB", "default"},  {"tls_cert", "", "default"},
      {"cache_dir", root + "/neff", "flag"},
  };
  for (const std::vector<std::string>& row : expected) {
    EXPECT_EQ(settings[row[0]].value(), row[1]) << row[0];
    EXPECT_EQ(settings[row[0]].origin(), row[2]) << row[0];
  }
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0);
}

TEST(NeffctlCommandLineTest, HelpListsCommandsAndTheirOptions) {
  CommandResult help = Neffctl({"--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  for (const char* shown :
       {"  lookup NS KEY\n", "  gc\n", "--max-size=SIZE", "  import DIR\n",
        "--clear-stale-locks", "--address=VALUE", "Exit codes:"}) {
    EXPECT_TRUE(absl::StrContains(help.out, shown)) << shown << "\n"
                                                    << help.out;
  }
  EXPECT_EQ(Neffctl({"help"}).out, help.out);

  CommandResult gc = Neffctl({"help", "gc"});
  EXPECT_EQ(gc.exit_code, 0) << gc.err;
  EXPECT_TRUE(absl::StartsWith(gc.out, "  gc\n")) << gc.out;
  EXPECT_TRUE(absl::StrContains(gc.out, "--older-than=DURATION")) << gc.out;
  EXPECT_FALSE(absl::StrContains(gc.out, "import")) << gc.out;

  CommandResult unknown = Neffctl({"help", "nosuchcmd"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(unknown.err, "no command 'nosuchcmd'"))
      << unknown.err;
  EXPECT_EQ(Lines(unknown.err), 1) << unknown.err;
}

// neffcc's is --neffcc-version: `neuronx-cc --version` is the real
// compiler's.
TEST(CommandLineTest, VersionIsTheVersionFile) {
  for (auto [name, result] :
       {std::pair{"neffd", Neffd({"--version"})},
        std::pair{"neffctl", Neffctl({"--version"})},
        std::pair{"neffcc", Neffcc({"--neffcc-version"})}}) {
    EXPECT_EQ(result.exit_code, 0) << name << ": " << result.err;
    EXPECT_EQ(result.out, absl::StrCat(name, " ", config::Version(), "\n"));
  }
  EXPECT_TRUE(absl::StrContains(Neffd({"--help"}).out, "neffd --version"));
  EXPECT_TRUE(absl::StrContains(Neffctl({"--help"}).out, "neffctl --version"));
}

}  // namespace
}  // namespace neffd
