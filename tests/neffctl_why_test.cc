// `neffctl why` and `neffctl drift` against a real neffd: entries published
// with neffcc's "key_inputs" metadata (and some without, or with a broken
// one, which take no part), a miss record on this host's local dir, the
// real neffctl binary; text, --json parsed back into its messages, and the
// exit codes of the README.
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "client/explain.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "proto/neffd/v1/key_reports.pb.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

constexpr char kVersion[] = "2.19.1";

v1::KeyInputsRecord Record(const std::string& flag, char input = 'a') {
  v1::KeyInputsRecord r;
  r.set_input_sha256(std::string(64, input));
  r.set_input_size(812);
  r.add_flags("--target=trn1");
  r.add_flags(flag);
  r.set_compiler_version(kVersion);
  r.set_platform_target("trn1");
  r.add_invocation("neuronx-cc");
  r.add_invocation("compile");
  return r;
}

template <typename Message>
Message ParseJson(const std::string& json) {
  Message message;
  const auto status =
      google::protobuf::util::JsonStringToMessage(json, &message);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return message;
}

// One line on stderr, as the README promises for exit 2.
bool OneLine(const std::string& err) {
  return !err.empty() && err.find('\n') == err.size() - 1;
}

class NeffctlWhyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = NewTempDir(
        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    daemon_ = std::make_unique<DaemonProcess>(root_);
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
    stub_ = daemon_->NewStub();
    local_dir_ = root_ + "/job-local";
  }

  void Publish(const std::string& key,
               const std::map<std::string, std::string>& metadata) {
    v1::EntryId id;
    id.set_namespace_("neff");
    id.set_compiler_version(kVersion);
    id.set_key(key);
    ASSERT_TRUE(PublishInline(*stub_, id, "neff of " + key, metadata).ok());
  }
  void PublishRecorded(const std::string& key,
                       const v1::KeyInputsRecord& record) {
    Publish(key, {{kKeyInputsMetadata, KeyInputsToJson(record)}});
  }

  // What neffcc leaves on this host before compiling a key that missed.
  void WriteMissRecord(const std::string& key,
                       const v1::KeyInputsRecord& record) {
    const std::string path = MissRecordPath(local_dir_, key);
    std::filesystem::create_directories(
        std::filesystem::path(path).parent_path());
    WriteFile(path, KeyInputsToJson(record));
  }

  CommandResult Ctl(std::vector<std::string> args,
                    const std::string& address = "") {
    std::vector<std::string> argv = {
        Runfile("client/neffctl"),
        "--address=" + (address.empty() ? daemon_->address() : address)};
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv,
                      {"TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR=" + local_dir_});
  }

  std::string root_, local_dir_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::CompileCache::Stub> stub_;
};

TEST_F(NeffctlWhyTest, MissNamesTheDifferingFlagsOfTheCachedKey) {
  PublishRecorded("k_o1", Record("-O1"));
  PublishRecorded("k_other", Record("-O3", 'b'));
  Publish("k_plain", {});
  Publish("k_broken", {{kKeyInputsMetadata, "{not json"}});
  WriteMissRecord("k_o3", Record("-O3"));

  CommandResult why = Ctl({"why", "neff", "k_o3"});
  ASSERT_EQ(why.exit_code, 0) << why.err;
  EXPECT_TRUE(absl::StartsWith(
      why.out,
      "miss k_o3: same input cached as k_o1 with flags differing: -O1 "
      "(cached) vs -O3 (now)\n"))
      << why.out;
  EXPECT_TRUE(absl::StrContains(why.out, MissRecordPath(local_dir_, "k_o3")))
      << why.out;
  EXPECT_TRUE(absl::StrContains(why.out, "neff/2.19.1/k_o1")) << why.out;
  EXPECT_FALSE(absl::StrContains(why.out, "k_other")) << why.out;

  CommandResult json = Ctl({"--json", "why", "neff", "k_o3"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto report = ParseJson<v1::WhyReport>(json.out);
  EXPECT_FALSE(report.cached());
  EXPECT_EQ(report.record_source(), MissRecordPath(local_dir_, "k_o3"));
  EXPECT_EQ(report.inputs().flags(1), "-O3");
  ASSERT_EQ(report.same_input_size(), 1);
  EXPECT_EQ(report.same_input(0).id().key(), "k_o1");
  ASSERT_EQ(report.same_input(0).flags_only_in_other_size(), 1);
  EXPECT_EQ(report.same_input(0).flags_only_in_other(0), "-O1");
  ASSERT_EQ(report.same_input(0).flags_only_in_this_size(), 1);
  EXPECT_EQ(report.same_input(0).flags_only_in_this(0), "-O3");
  EXPECT_EQ(report.explanation(), why.out.substr(0, why.out.find('\n')));
}

TEST_F(NeffctlWhyTest, CachedKeyListsTheOtherKeysOfItsInput) {
  PublishRecorded("k_o1", Record("-O1"));
  PublishRecorded("k_o3", Record("-O3"));

  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"why", "neff", "k_o3"},
        std::vector<std::string>{"--compiler_version=2.19.1", "why", "neff",
                                 "k_o3"}}) {
    CommandResult why = Ctl(args);
    ASSERT_EQ(why.exit_code, 0) << why.err;
    EXPECT_TRUE(absl::StartsWith(
        why.out,
        "neff/2.19.1/k_o3 is cached; 1 other cached key has the same input\n"))
        << why.out;
    EXPECT_TRUE(absl::StrContains(
        why.out, "flags differing: -O1 (other) vs -O3 (this key)"))
        << why.out;
  }
  CommandResult json = Ctl({"--json", "why", "neff", "k_o3"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto report = ParseJson<v1::WhyReport>(json.out);
  EXPECT_TRUE(report.cached());
  EXPECT_EQ(report.record_source(), "entry metadata");
  EXPECT_EQ(report.id().compiler_version(), kVersion);
  ASSERT_EQ(report.same_input_size(), 1);
  EXPECT_EQ(report.same_input(0).id().key(), "k_o1");
}

TEST_F(NeffctlWhyTest, NoRecordOfTheKeyExitsOne) {
  Publish("k_plain", {});
  for (const char* key : {"k_plain", "k_unknown"}) {
    CommandResult why = Ctl({"why", "neff", key});
    EXPECT_EQ(why.exit_code, 1) << key << ": " << why.out << why.err;
    EXPECT_TRUE(OneLine(why.err)) << why.err;
    EXPECT_TRUE(absl::StrContains(why.err, "no record")) << why.err;
  }
}

TEST_F(NeffctlWhyTest, DriftListsAnInputCachedUnderTwoKeys) {
  PublishRecorded("k_o1", Record("-O1"));
  PublishRecorded("k_o3", Record("-O3"));
  PublishRecorded("k_other", Record("-O3", 'b'));
  Publish("k_plain", {});
  Publish("k_broken", {{kKeyInputsMetadata, "{not json"}});

  CommandResult drift = Ctl({"drift"});
  ASSERT_EQ(drift.exit_code, 0) << drift.err;
  const std::string& out = drift.out;
  const size_t o1 = out.find("neff/2.19.1/k_o1");
  const size_t o3 = out.find("neff/2.19.1/k_o3");
  ASSERT_NE(o1, std::string::npos) << out;
  ASSERT_NE(o3, std::string::npos) << out;
  EXPECT_NE(out.find("-O1", o1), std::string::npos) << out;
  EXPECT_NE(out.find("-O3", o3), std::string::npos) << out;
  EXPECT_FALSE(absl::StrContains(out, "k_other")) << out;
  EXPECT_TRUE(absl::StrContains(
      out,
      "1 input cached under more than one key (3 entries with key-input "
      "records, 2 without)"))
      << out;

  CommandResult json = Ctl({"--json", "drift"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  const auto report = ParseJson<v1::DriftReport>(json.out);
  EXPECT_EQ(report.recorded_entries(), 3u);
  EXPECT_EQ(report.unrecorded_entries(), 2u);
  ASSERT_EQ(report.inputs_size(), 1);
  const v1::DriftInput& input = report.inputs(0);
  EXPECT_EQ(input.input_sha256(), std::string(64, 'a'));
  ASSERT_EQ(input.differing_flags_size(), 2);
  EXPECT_EQ(input.differing_flags(0), "-O1");
  EXPECT_EQ(input.differing_flags(1), "-O3");
  ASSERT_EQ(input.keys_size(), 2);
  EXPECT_EQ(input.keys(0).id().key(), "k_o1");
  EXPECT_EQ(input.keys(1).id().key(), "k_o3");
  ASSERT_EQ(input.keys(1).differing_flags_size(), 1);
  EXPECT_EQ(input.keys(1).differing_flags(0), "-O3");

  CommandResult other_version =
      Ctl({"--json", "drift", "--compiler_version=2.18.0"});
  ASSERT_EQ(other_version.exit_code, 0) << other_version.err;
  EXPECT_EQ(ParseJson<v1::DriftReport>(other_version.out).inputs_size(), 0);
}

TEST_F(NeffctlWhyTest, BadArgumentsExitTwoWithOneLineAndKeepEntries) {
  PublishRecorded("k_o1", Record("-O1"));
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{
           {"why", "neff"},
           {"why", "neff", "k_o1", "extra"},
           {"why", "bogus", "k_o1"},
           {"why", "neff", "../../etc/passwd"},
           {"why", "neff", "k_o1", "--compiler_version=a/b"},
           {"drift", "extra"},
           {"drift", "--namespace=bogus"},
       }) {
    CommandResult r = Ctl(args);
    EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(args, " ") << ": " << r.err;
    EXPECT_TRUE(OneLine(r.err)) << absl::StrJoin(args, " ") << ": " << r.err;
  }
  CommandResult lookup = Ctl({"--compiler_version=2.19.1", "--json", "get",
                              "neff", "k_o1", root_ + "/out.neff"});
  ASSERT_EQ(lookup.exit_code, 0) << lookup.err;
  EXPECT_EQ(ReadFile(root_ + "/out.neff"), "neff of k_o1");
}

TEST_F(NeffctlWhyTest, UnreachableDaemonExitsThree) {
  WriteMissRecord("k_o3", Record("-O3"));
  // Short: a socket path over sun_path's 108 bytes fails differently.
  const std::string nowhere =
      absl::StrCat("unix:/tmp/neffctl-why-", getpid(), ".sock");
  EXPECT_EQ(Ctl({"why", "neff", "k_o3"}, nowhere).exit_code, 3);
  EXPECT_EQ(Ctl({"drift"}, nowhere).exit_code, 3);
}

}  // namespace
}  // namespace neffd::test_support
