#include "config/env.h"

#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neffd::config {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Fixed host facts, so that derived defaults are known.
SnapshotOptions TestOptions() {
  SnapshotOptions options;
  options.product_name_path = "/nonexistent/product_name";
  options.user_name = "alice";
  options.uid = 1234;
  return options;
}

EnvSnapshot Snapshot(const std::map<std::string, std::string>& env,
                     SnapshotOptions options = TestOptions()) {
  return EnvSnapshot::FromMap(env, options);
}

// One row per variable of the registry: its default (as FormatValue prints
// it, with TestOptions()), a valid value and what it reads as, and an invalid
// value with a piece of its warning. `invalid` is null for the variables that
// accept every value; then `junk` must be accepted without a warning.
struct Case {
  const char* name;
  const char* default_text;
  Origin default_origin;
  const char* valid;
  const char* valid_text;
  const char* invalid;
  const char* warning;
};

constexpr Origin kDefault = Origin::kDefault;
constexpr Origin kDerived = Origin::kDerived;
constexpr char kBoolWarning[] = "expected 1/0, true/false, yes/no or on/off";
constexpr char kNonEmpty[] = "expected a non-empty value";
constexpr char kAbsolute[] = "expected an absolute path";

const Case kCases[] = {
    {"TORCH_NEURONX_DEBUG_DIR", "/tmp/neuron_backend", kDefault, "/data/dbg",
     "/data/dbg", "", kNonEmpty},
    {"TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "false", kDefault, "YES",
     "true", "2", kBoolWarning},
    {"TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "true", kDefault, "off",
     "false", "disable", kBoolWarning},
    {"TORCH_NEURONX_COMPLEX_DECOMPOSE", "false", kDerived, "on", "true",
     "maybe", kBoolWarning},
    {"TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", "false", kDefault, "1",
     "true", "01", kBoolWarning},
    {"TORCH_NEURONX_COMPILE_ONLY", "false", kDefault, "True", "true", "t",
     kBoolWarning},
    {"TORCH_NEURONX_DYNAMO_TENSOR_DUMPS", "(unset)", kDefault, "1", "1",
     nullptr, nullptr},
    {"NEURON_PLATFORM_TARGET_OVERRIDE", "(unset)", kDerived, "trn3", "trn3",
     "Trn2", "expected a platform name such as trn2 or trn3"},
    {"TORCH_NEURONX_NEFF_CACHE_DIR", "/tmp/neff_cache", kDefault, "/fsx/neff",
     "/fsx/neff", "fsx/neff", kAbsolute},
    {"TORCH_NEURONX_HLO_CACHE_DIR", "/tmp/hlo_cache", kDefault, "/fsx/hlo",
     "/fsx/hlo", "hlo", kAbsolute},
    {"TORCH_NEURONX_HLO_CACHE", "true", kDefault, "0", "false", "nope",
     kBoolWarning},
    {"TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", "/tmp/local_cache", kDefault,
     "/var/cache/neffd", "/var/cache/neffd", "", kAbsolute},
    {"TORCH_NEURONX_NEFF_DISABLE_CACHE", "false", kDefault, "on", "true",
     "enabled", kBoolWarning},
    {"TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", "1200", kDefault, "60", "60",
     "-5", "expected a plain decimal integer >= 0"},
    {"TORCH_NEURONX_NEFF_KEY_FROM_HLO", "true", kDefault, "no", "false", "hlo",
     kBoolWarning},
    {"NKI_ENABLE_TRACE_CACHE", "true", kDefault, "OFF", "false", "of",
     kBoolWarning},
    {"NKI_TRACE_CACHE_URL", "/var/tmp/nki-trace-cache-1234/", kDerived,
     "s3://bucket/nki", "s3://bucket/nki", "", kNonEmpty},
    {"TORCH_CACHING_PRECOMPILE", "false", kDefault, "1", "true", "11",
     kBoolWarning},
    {"TORCHINDUCTOR_CACHE_DIR", "/tmp/torchinductor_alice/", kDerived,
     "/scratch/inductor", "/scratch/inductor", "", kNonEmpty},
    {"NEURON_LAUNCH_BLOCKING", "false", kDefault, "yes", "true", "sync",
     kBoolWarning},
    {"TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", "false", kDefault,
     "TRUE", "true", "2", kBoolWarning},
    {"TORCH_NEURONX_ENABLE_STACK_TRACE", "false", kDefault, "1", "true", "y",
     kBoolWarning},
    {"TORCH_NEURONX_LOG_LEVEL", "1", kDefault, "3", "3", "7",
     "expected a plain decimal integer from 0 to 3"},
    {"TORCH_NEURONX_USE_PINNED_MALLOC", "false", kDefault, "on", "true",
     "pinned", kBoolWarning},
    {"TORCH_NEURONX_ENABLED_METRIC_TABLES", "", kDefault, "op_stats, compile",
     "op_stats,compile", "op stats", "is not a name"},
    {"TORCH_NEURONX_METRICS_DIR", "/tmp", kDefault, "/data/metrics",
     "/data/metrics", "", kNonEmpty},
    {"TORCH_NEURONX_PROFILE_DEFAULT_SESSION", "true", kDefault, "0", "false",
     "disabled", kBoolWarning},
    {"TORCH_NEURONX_PROFILE_MODES", "runtime,cpu_util,host_memory", kDefault,
     "runtime,device", "runtime,device", "runtime,gpu",
     "expected a subset of runtime,cpu_util,host_memory,device"},
    {"TORCH_NEURONX_PROFILE_RANKS", "0", kDefault, "16,0,8", "0,8,16", "0-7",
     "expected comma-separated plain decimal integers >= 0"},
    {"TORCH_NEURONX_PROFILE_MAX_EVENTS_PER_NC", "10000000", kDefault, "500",
     "500", "0", "expected a plain decimal integer >= 1"},
    {"TORCH_NEURONX_PROFILE_CAPTURE_NC", "0,1", kDefault, "0,1,2-5",
     "0,1,2,3,4,5", "5-2", "range \"5-2\" is reversed"},
    {"TORCH_NEURONX_PROFILE_OUTPUT_DIR", "neuron_profile", kDefault,
     "/tmp/prof", "/tmp/prof", "", kNonEmpty},
    {"RANK", "0", kDefault, "17", "17", "-1",
     "expected a plain decimal integer >= 0"},
    {"TORCH_NEURONX_ENABLE_STREAMS", "true", kDefault, "0", "false", "true",
     "expected 0 or 1"},
    {"TORCH_NEURONX_ENABLE_HOST_CC", "false", kDefault, "1", "true", "2",
     kBoolWarning},
    {"NEURON_USE_SPLIT_ALLGATHER", "true", kDefault, "1", "true", nullptr,
     nullptr},
    {"NEURON_USE_SPLIT_REDUCE_SCATTER", "true", kDefault, "1", "true", nullptr,
     nullptr},
    {"NEURON_USE_NKI_ALLTOALLV", "true", kDefault, "0", "false", "native",
     kBoolWarning},
    {"COLLECTIVE_BUCKETSIZE_IN_MB", "512", kDefault, "1", "1", "0",
     "expected a plain decimal integer >= 1"},
    {"TORCH_NEURONX_ENABLE_SCALAR_CACHE", "true", kDefault, "false", "false",
     "cache", kBoolWarning},
    {"TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG", "", kDefault,
     "kRoundupPower2Divisions=8", "kRoundupPower2Divisions=8", nullptr,
     nullptr},
    {"NEFFD_ADDRESS", "unix:/run/neffd/neffd.sock", kDefault, "127.0.0.1:7878",
     "127.0.0.1:7878", "unix:neffd.sock",
     "expected unix:/absolute/path or HOST:PORT"},
    {"NEFFD_ADMIN_ADDRESS", "unix:/run/neffd/admin.sock", kDefault,
     "unix:/run/neffd/ops.sock", "unix:/run/neffd/ops.sock", "admin.sock",
     "expected unix:/absolute/path or HOST:PORT"},
    {"NEFFD_REAL_COMPILER", "(unset)", kDefault, "/opt/neuron/bin/neuronx-cc",
     "/opt/neuron/bin/neuronx-cc", "neuronx-cc", kAbsolute},
    {"NEFFD_DISABLE", "false", kDefault, "1", "true", "sometimes",
     kBoolWarning},
    {"NEFFD_NO_COMPILE", "false", kDefault, "yes", "true", "never",
     kBoolWarning},
    {"NEFFD_EXPLAIN", "false", kDefault, "on", "true", "loud", kBoolWarning},
    {"NEFFD_REMOTE", "(unset)", kDefault, "s3://bucket/neff",
     "s3://bucket/neff", nullptr, nullptr},
    {"NEFFD_COORDINATOR", "(unset)", kDefault, "etcd://10.0.0.5:2379",
     "etcd://10.0.0.5:2379", nullptr, nullptr},
    {"NEFFD_S3_ENDPOINT", "(unset)", kDefault, "http://127.0.0.1:4568",
     "http://127.0.0.1:4568", nullptr, nullptr},
    {"NEFFD_REMOTE_MODE", "rw", kDefault, "ro", "ro", nullptr, nullptr},
    {"AWS_REGION", "(unset)", kDefault, "eu-west-1", "eu-west-1", nullptr,
     nullptr},
    {"AWS_DEFAULT_REGION", "(unset)", kDefault, "eu-west-1", "eu-west-1",
     nullptr, nullptr},
    {"JOURNAL_STREAM", "(unset)", kDefault, "8:12345", "8:12345", nullptr,
     nullptr},
};

class EveryVariable : public ::testing::TestWithParam<Case> {};

TEST_P(EveryVariable, Default) {
  const Case& c = GetParam();
  EnvSnapshot snapshot = Snapshot({});
  EXPECT_EQ(snapshot.FormatValue(c.name), c.default_text);
  EXPECT_EQ(snapshot.origin(c.name), c.default_origin);
  EXPECT_THAT(snapshot.warnings(), IsEmpty());
}

TEST_P(EveryVariable, ValidValue) {
  const Case& c = GetParam();
  EnvSnapshot snapshot = Snapshot({{c.name, c.valid}});
  EXPECT_EQ(snapshot.FormatValue(c.name), c.valid_text);
  EXPECT_EQ(snapshot.origin(c.name), Origin::kEnv);
  EXPECT_TRUE(snapshot.IsSet(c.name));
  EXPECT_THAT(snapshot.warnings(), IsEmpty());
}

TEST_P(EveryVariable, InvalidValueWarnsAndKeepsDefault) {
  const Case& c = GetParam();
  if (c.invalid == nullptr) {
    EnvSnapshot snapshot = Snapshot({{c.name, "junk value"}});
    EXPECT_EQ(snapshot.origin(c.name), Origin::kEnv);
    EXPECT_THAT(snapshot.warnings(), IsEmpty());
    return;
  }
  EnvSnapshot snapshot = Snapshot({{c.name, c.invalid}});
  EXPECT_EQ(snapshot.origin(c.name), Origin::kInvalid);
  EXPECT_EQ(snapshot.FormatValue(c.name), c.default_text);
  ASSERT_THAT(snapshot.warnings(), ElementsAre(HasSubstr(c.warning)));
  const std::string& warning = snapshot.warnings()[0];
  EXPECT_THAT(warning, HasSubstr(absl::StrCat(c.name, "=\"", c.invalid,
                                              "\" is invalid: ")));
  EXPECT_THAT(warning,
              HasSubstr(absl::StrCat("; using the default ", c.default_text)));
}

INSTANTIATE_TEST_SUITE_P(Registry, EveryVariable, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

TEST(Registry, TheTestTableCoversEveryVariable) {
  std::set<std::string> registry;
  for (const VarSpec& spec : Variables()) registry.insert(spec.name);
  std::set<std::string> cases;
  for (const Case& c : kCases) cases.insert(c.name);
  EXPECT_EQ(cases, registry);
  EXPECT_EQ(registry.size(), Variables().size()) << "duplicate names";
  EXPECT_EQ(cases.size(), std::size(kCases)) << "duplicate cases";
}

TEST(Registry, EverySpecIsComplete) {
  for (const VarSpec& spec : Variables()) {
    SCOPED_TRACE(spec.name);
    EXPECT_EQ(FindVariable(spec.name), &spec);
    EXPECT_NE(std::string(spec.doc), "");
    EXPECT_NE(std::string(spec.section), "");
    EXPECT_NE(spec.readers, 0u);
    EXPECT_LE(spec.min, spec.max);
    // A computed default says in the docs how it is computed.
    EXPECT_EQ(spec.derivation != Derivation::kNone,
              spec.default_doc != nullptr);
    if (spec.requires_true != nullptr) {
      ASSERT_NE(FindVariable(spec.requires_true), nullptr);
      EXPECT_EQ(FindVariable(spec.requires_true)->type, Type::kBool);
      EXPECT_EQ(spec.type, Type::kBool);
    }
  }
  EXPECT_EQ(FindVariable("NOPE"), nullptr);
}

TEST(Registry, NeffdAddressIsReadByDaemonAndClient) {
  const VarSpec* spec = FindVariable("NEFFD_ADDRESS");
  ASSERT_NE(spec, nullptr);
  EXPECT_EQ(ReadersText(spec->readers), "daemon, client");
  EXPECT_EQ(
      ReadersText(
          FindVariable("TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG")->readers),
      "allocator");
}

TEST(Snapshot, TypedAccessors) {
  EnvSnapshot snapshot = Snapshot({
      {"TORCH_NEURONX_COMPILE_ONLY", "yes"},
      {"TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", "60"},
      {"TORCH_NEURONX_NEFF_CACHE_DIR", "/fsx/neff"},
      {"TORCH_NEURONX_PROFILE_CAPTURE_NC", "0,1,2-5"},
      {"TORCH_NEURONX_PROFILE_MODES", "runtime,device"},
  });
  EXPECT_TRUE(snapshot.GetBool("TORCH_NEURONX_COMPILE_ONLY"));
  EXPECT_EQ(snapshot.GetInt("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"), 60);
  EXPECT_EQ(snapshot.GetString("TORCH_NEURONX_NEFF_CACHE_DIR"), "/fsx/neff");
  EXPECT_EQ(snapshot.GetString("TORCH_NEURONX_DEBUG_DIR"),
            "/tmp/neuron_backend");
  EXPECT_THAT(snapshot.GetIntList("TORCH_NEURONX_PROFILE_CAPTURE_NC"),
              ElementsAre(0, 1, 2, 3, 4, 5));
  EXPECT_THAT(snapshot.GetIntList("TORCH_NEURONX_PROFILE_RANKS"),
              ElementsAre(0));
  EXPECT_THAT(snapshot.GetStringList("TORCH_NEURONX_PROFILE_MODES"),
              ElementsAre("runtime", "device"));
  EXPECT_THAT(snapshot.GetStringList("TORCH_NEURONX_ENABLED_METRIC_TABLES"),
              IsEmpty());
  EXPECT_EQ(snapshot.GetInt("TORCH_NEURONX_LOG_LEVEL"), 1);
  EXPECT_EQ(snapshot.GetString("NEFFD_ADDRESS"), "unix:/run/neffd/neffd.sock");
}

TEST(Snapshot, OverflowAndJunkIntegersKeepTheDefault) {
  for (const char* junk :
       {"99999999999999999999", "+60", " 60", "60s", "1e3", "0x3c", ""}) {
    EnvSnapshot snapshot =
        Snapshot({{"TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", junk}});
    EXPECT_EQ(snapshot.GetInt("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"), 1200)
        << junk;
    EXPECT_EQ(snapshot.origin("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"),
              Origin::kInvalid);
    EXPECT_EQ(snapshot.warnings().size(), 1u) << junk;
  }
}

TEST(Snapshot, WarningsQuoteUnprintableValues) {
  EnvSnapshot snapshot = Snapshot({{"TORCH_NEURONX_LOG_LEVEL", "1\n2"}});
  ASSERT_EQ(snapshot.warnings().size(), 1u);
  EXPECT_THAT(snapshot.warnings()[0],
              HasSubstr("TORCH_NEURONX_LOG_LEVEL=\"1\\n2\""));
}

TEST(Snapshot, EnableStreamsAcceptsOnlyZeroAndOne) {
  for (const char* other : {"true", "yes", "on", "false", "2"}) {
    EnvSnapshot snapshot = Snapshot({{"TORCH_NEURONX_ENABLE_STREAMS", other}});
    EXPECT_TRUE(snapshot.GetBool("TORCH_NEURONX_ENABLE_STREAMS")) << other;
    EXPECT_EQ(snapshot.warnings().size(), 1u) << other;
  }
}

TEST(Snapshot, SplitCollectivesDependOnTheStreamWhenUnset) {
  EnvSnapshot unset = Snapshot({});
  EXPECT_TRUE(unset.SplitAllgatherEnabled(/*default_stream=*/true));
  EXPECT_FALSE(unset.SplitAllgatherEnabled(/*default_stream=*/false));
  EXPECT_TRUE(unset.SplitReduceScatterEnabled(true));
  EXPECT_FALSE(unset.SplitReduceScatterEnabled(false));
  EXPECT_FALSE(unset.note("NEURON_USE_SPLIT_ALLGATHER").empty());
}

TEST(Snapshot, SplitCollectivesOnlyOneEnablesWithoutWarnings) {
  EnvSnapshot one = Snapshot({{"NEURON_USE_SPLIT_ALLGATHER", "1"},
                              {"NEURON_USE_SPLIT_REDUCE_SCATTER", "1"}});
  EXPECT_TRUE(one.SplitAllgatherEnabled(false));
  EXPECT_TRUE(one.SplitReduceScatterEnabled(false));
  for (const char* other : {"0", "true", "yes", "on", "", "2"}) {
    EnvSnapshot snapshot =
        Snapshot({{"NEURON_USE_SPLIT_ALLGATHER", other},
                  {"NEURON_USE_SPLIT_REDUCE_SCATTER", other}});
    EXPECT_FALSE(snapshot.SplitAllgatherEnabled(true)) << other;
    EXPECT_FALSE(snapshot.SplitReduceScatterEnabled(true)) << other;
    EXPECT_EQ(snapshot.origin("NEURON_USE_SPLIT_ALLGATHER"), Origin::kEnv);
    EXPECT_THAT(snapshot.warnings(), IsEmpty()) << other;
  }
}

TEST(Snapshot, SplitCollectivesWithStreamsOffUseTheDefaultStream) {
  EnvSnapshot snapshot = Snapshot({{"TORCH_NEURONX_ENABLE_STREAMS", "0"}});
  EXPECT_TRUE(snapshot.SplitAllgatherEnabled(false));
  EXPECT_TRUE(snapshot.SplitReduceScatterEnabled(false));
}

TEST(Snapshot, HostCollectivesNeedStreams) {
  EnvSnapshot off = Snapshot({{"TORCH_NEURONX_ENABLE_HOST_CC", "1"},
                              {"TORCH_NEURONX_ENABLE_STREAMS", "0"}});
  EXPECT_FALSE(off.GetBool("TORCH_NEURONX_ENABLE_HOST_CC"));
  EXPECT_EQ(off.origin("TORCH_NEURONX_ENABLE_HOST_CC"), Origin::kDerived);
  EXPECT_THAT(off.warnings(),
              ElementsAre("TORCH_NEURONX_ENABLE_HOST_CC=\"1\" has no effect "
                          "while TORCH_NEURONX_ENABLE_STREAMS is off; using "
                          "false (set TORCH_NEURONX_ENABLE_STREAMS=1)"));

  EnvSnapshot on = Snapshot({{"TORCH_NEURONX_ENABLE_HOST_CC", "1"}});
  EXPECT_TRUE(on.GetBool("TORCH_NEURONX_ENABLE_HOST_CC"));
  EXPECT_THAT(on.warnings(), IsEmpty());

  EnvSnapshot neither = Snapshot({{"TORCH_NEURONX_ENABLE_HOST_CC", "0"},
                                  {"TORCH_NEURONX_ENABLE_STREAMS", "0"}});
  EXPECT_THAT(neither.warnings(), IsEmpty());
}

TEST(Snapshot, ComplexDecomposeFollowsThePyTorchVersion) {
  struct VersionCase {
    const char* version;
    bool expected;
  };
  for (const VersionCase& c :
       {VersionCase{"2.13", true}, VersionCase{"2.13.0+cpu", true},
        VersionCase{"2.14.1", true}, VersionCase{"3.0", true},
        VersionCase{"2.12.1", false}, VersionCase{"2.9", false},
        VersionCase{"", false}, VersionCase{"junk", false}}) {
    SnapshotOptions options = TestOptions();
    options.torch_version = c.version;
    EnvSnapshot snapshot = Snapshot({}, options);
    EXPECT_EQ(snapshot.GetBool("TORCH_NEURONX_COMPLEX_DECOMPOSE"), c.expected)
        << c.version;
    EXPECT_EQ(snapshot.origin("TORCH_NEURONX_COMPLEX_DECOMPOSE"),
              Origin::kDerived);
    EXPECT_FALSE(snapshot.note("TORCH_NEURONX_COMPLEX_DECOMPOSE").empty());
    EXPECT_THAT(snapshot.warnings(), IsEmpty());
  }
  SnapshotOptions options = TestOptions();
  options.torch_version = "2.13";
  EnvSnapshot set =
      Snapshot({{"TORCH_NEURONX_COMPLEX_DECOMPOSE", "0"}}, options);
  EXPECT_FALSE(set.GetBool("TORCH_NEURONX_COMPLEX_DECOMPOSE"));
  EXPECT_EQ(set.origin("TORCH_NEURONX_COMPLEX_DECOMPOSE"), Origin::kEnv);
}

class PlatformTarget : public ::testing::Test {
 protected:
  SnapshotOptions WithProductName(const std::string& contents) {
    SnapshotOptions options = TestOptions();
    options.product_name_path =
        absl::StrCat(::testing::TempDir(), "/product_name");
    std::ofstream(options.product_name_path) << contents;
    return options;
  }
};

TEST_F(PlatformTarget, DerivedFromATrainiumInstance) {
  EnvSnapshot snapshot = Snapshot({}, WithProductName("trn2.48xlarge\n"));
  EXPECT_TRUE(snapshot.IsSet("NEURON_PLATFORM_TARGET_OVERRIDE"));
  EXPECT_EQ(snapshot.GetString("NEURON_PLATFORM_TARGET_OVERRIDE"), "trn2");
  EXPECT_EQ(snapshot.origin("NEURON_PLATFORM_TARGET_OVERRIDE"),
            Origin::kDerived);
  EXPECT_EQ(Snapshot({}, WithProductName("trn3.48xlarge"))
                .GetString("NEURON_PLATFORM_TARGET_OVERRIDE"),
            "trn3");
}

TEST_F(PlatformTarget, UnsetElsewhere) {
  for (const char* product : {"m5.large\n", "", "inf2.xlarge"}) {
    EnvSnapshot snapshot = Snapshot({}, WithProductName(product));
    EXPECT_FALSE(snapshot.IsSet("NEURON_PLATFORM_TARGET_OVERRIDE")) << product;
    EXPECT_EQ(snapshot.GetString("NEURON_PLATFORM_TARGET_OVERRIDE"), "");
    EXPECT_EQ(snapshot.FormatValue("NEURON_PLATFORM_TARGET_OVERRIDE"),
              "(unset)");
    EXPECT_EQ(snapshot.origin("NEURON_PLATFORM_TARGET_OVERRIDE"),
              Origin::kDerived);
    EXPECT_THAT(snapshot.warnings(), IsEmpty());
  }
  EnvSnapshot missing = Snapshot({});  // no product_name file at all
  EXPECT_FALSE(missing.IsSet("NEURON_PLATFORM_TARGET_OVERRIDE"));
  EXPECT_THAT(missing.note("NEURON_PLATFORM_TARGET_OVERRIDE"),
              HasSubstr("cannot read /nonexistent/product_name"));
}

TEST_F(PlatformTarget, EnvironmentWins) {
  EnvSnapshot snapshot = Snapshot({{"NEURON_PLATFORM_TARGET_OVERRIDE", "trn3"}},
                                  WithProductName("trn2.48xlarge"));
  EXPECT_EQ(snapshot.GetString("NEURON_PLATFORM_TARGET_OVERRIDE"), "trn3");
  EXPECT_EQ(snapshot.origin("NEURON_PLATFORM_TARGET_OVERRIDE"), Origin::kEnv);

  EnvSnapshot invalid = Snapshot({{"NEURON_PLATFORM_TARGET_OVERRIDE", "TRN3"}},
                                 WithProductName("trn2.48xlarge"));
  EXPECT_EQ(invalid.GetString("NEURON_PLATFORM_TARGET_OVERRIDE"), "trn2");
  EXPECT_EQ(invalid.origin("NEURON_PLATFORM_TARGET_OVERRIDE"),
            Origin::kInvalid);
  EXPECT_EQ(invalid.warnings().size(), 1u);
}

TEST(Snapshot, InductorCacheDirFollowsTheUserLikeGetpass) {
  SnapshotOptions options = TestOptions();
  options.user_name.clear();
  EXPECT_EQ(
      Snapshot({{"USER", "bob"}}, options).GetString("TORCHINDUCTOR_CACHE_DIR"),
      "/tmp/torchinductor_bob/");
  EXPECT_EQ(Snapshot({{"USER", "bob"}, {"LOGNAME", "carol"}}, options)
                .GetString("TORCHINDUCTOR_CACHE_DIR"),
            "/tmp/torchinductor_carol/");
  options.user_name = "corp\\dave";
  EXPECT_EQ(Snapshot({}, options).GetString("TORCHINDUCTOR_CACHE_DIR"),
            "/tmp/torchinductor_corp_dave/");
}

TEST(Snapshot, NkiTraceCacheLocation) {
  EnvSnapshot unset = Snapshot({});
  EXPECT_EQ(unset.GetString("NKI_TRACE_CACHE_URL"),
            "/var/tmp/nki-trace-cache-1234/");
  EnvSnapshot set = Snapshot({{"NKI_TRACE_CACHE_URL", "/fsx/nki"}});
  EXPECT_EQ(set.GetString("NKI_TRACE_CACHE_URL"), "/fsx/nki");
  EXPECT_EQ(set.origin("NKI_TRACE_CACHE_URL"), Origin::kEnv);
}

TEST(Snapshot, UnknownVariablesNearAKnownOneAreTypos) {
  EnvSnapshot snapshot = Snapshot({
      {"TORCH_NEURONX_NEFF_CACHE_DIRR", "/x"},
      {"NEURON_LAUNCH_BLOKING", "1"},
      {"NEFFD_ADRESS", "unix:/x"},
      {"TORCH_NEURONX_SOMETHING_NEW", "1"},  // far from every known name
      {"NEURON_RT_VISIBLE_CORES", "0-3"},    // the runtime's, not ours
      {"RANKK", "1"},                        // prefix not checked
      {"torch_neuronx_log_level", "1"},      // prefix is case-sensitive
  });
  EXPECT_THAT(
      snapshot.warnings(),
      ElementsAre(
          "unknown variable NEFFD_ADRESS; did you mean NEFFD_ADDRESS?",
          "unknown variable NEURON_LAUNCH_BLOKING; did you mean "
          "NEURON_LAUNCH_BLOCKING?",
          "unknown variable TORCH_NEURONX_NEFF_CACHE_DIRR; did you mean "
          "TORCH_NEURONX_NEFF_CACHE_DIR?"));
  EXPECT_EQ(SuggestVariable("TORCH_NEURONX_LOGLEVEL")->name,
            std::string("TORCH_NEURONX_LOG_LEVEL"));
  EXPECT_EQ(SuggestVariable("TORCH_NEURONX_LOG"), nullptr);
}

TEST(Snapshot, WarningsInRegistryOrderThenUnknownNames) {
  EnvSnapshot snapshot = Snapshot({{"TORCH_NEURONX_NEFF_CACHE_DIRR", "/x"},
                                   {"NEFFD_ADDRESS", "nowhere"},
                                   {"TORCH_NEURONX_LOG_LEVEL", "x"}});
  ASSERT_EQ(snapshot.warnings().size(), 3u);
  EXPECT_THAT(snapshot.warnings()[0], HasSubstr("TORCH_NEURONX_LOG_LEVEL"));
  EXPECT_THAT(snapshot.warnings()[1], HasSubstr("NEFFD_ADDRESS"));
  EXPECT_THAT(snapshot.warnings()[2], HasSubstr("unknown variable"));
}

TEST(Snapshot, FromProcessEnvironmentReadsEnviron) {
  ASSERT_EQ(setenv("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", "77", 1), 0);
  EnvSnapshot snapshot = EnvSnapshot::FromProcessEnvironment(TestOptions());
  unsetenv("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT");
  EXPECT_EQ(snapshot.GetInt("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"), 77);
  EXPECT_EQ(snapshot.origin("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"),
            Origin::kEnv);
}

TEST(SnapshotDeathTest, UnknownNameOrWrongTypeIsAProgrammingError) {
  EnvSnapshot snapshot = Snapshot({});
  EXPECT_DEATH(snapshot.GetBool("TORCH_NEURONX_NOPE"),
               "GetBool\\(\"TORCH_NEURONX_NOPE\"\\): no such variable");
  EXPECT_DEATH(snapshot.GetInt("TORCH_NEURONX_COMPILE_ONLY"),
               "TORCH_NEURONX_COMPILE_ONLY is of type bool");
  EXPECT_DEATH(snapshot.origin("NOPE"), "no such variable");
}

}  // namespace
}  // namespace neffd::config
