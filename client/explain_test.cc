#include "client/explain.h"

#include "gtest/gtest.h"

namespace neffd {
namespace {

v1::KeyInputsRecord Record(std::vector<std::string> flags,
                           std::string version = "2.19.1",
                           std::string sha = std::string(64, 'a')) {
  v1::KeyInputsRecord r;
  r.set_input_sha256(sha);
  r.set_input_size(812);
  for (auto& f : flags) r.add_flags(f);
  r.set_compiler_version(version);
  r.set_platform_target("trn2");
  r.add_invocation("neuronx-cc");
  return r;
}

TEST(ExplainTest, JsonRoundTripsAndRejectsGarbage) {
  const v1::KeyInputsRecord r = Record({"--target=trn2", "-O2"});
  absl::StatusOr<v1::KeyInputsRecord> back =
      KeyInputsFromJson(KeyInputsToJson(r));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->SerializeAsString(), r.SerializeAsString());
  EXPECT_NE(KeyInputsToJson(r).find("\"input_sha256\""), std::string::npos);
  EXPECT_EQ(KeyInputsFromJson("[1,2").status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ExplainTest, NamesTheDifferingFlags) {
  const std::string line =
      ExplainMiss("3f2a0000000000000000", Record({"--target=trn2", "-O3"}),
                  {{"b0000000000000000000", Record({"--target=trn2", "-O1"})}});
  EXPECT_EQ(line,
            "miss 3f2a00000000…: same input cached as b00000000000… with "
            "flags differing: -O1 (cached) vs -O3 (now)");
}

TEST(ExplainTest, NamesAVersionChangeAndPicksTheClosestEntry) {
  const std::string line =
      ExplainMiss("k1", Record({"-O2"}, "2.19.1"),
                  {{"far", Record({"-O1", "--fast"}, "2.18.0")},
                   {"near", Record({"-O2"}, "2.18.0")}});
  EXPECT_EQ(line,
            "miss k1: same input cached as near with compiler version 2.18.0 "
            "(cached) vs 2.19.1 (now)");
}

TEST(ExplainTest, SaysWhenNoEntryHasTheInput) {
  const std::string line =
      ExplainMiss("k1", Record({"-O2"}),
                  {{"other", Record({"-O2"}, "2.19.1", std::string(64, 'b'))}});
  EXPECT_EQ(line,
            "miss k1: no cached entry has the same input (sha256 "
            "aaaaaaaaaaaa…, 812 bytes)");
}

TEST(ExplainTest, DescribesADifferenceUnderTheGivenLabels) {
  EXPECT_EQ(DescribeDifference(Record({"-O1"}, "2.18.0"), "k2",
                               Record({"-O3"}, "2.19.1"), "this key"),
            "flags differing: -O1 (k2) vs -O3 (this key); compiler version "
            "2.18.0 (k2) vs 2.19.1 (this key)");
  EXPECT_EQ(DescribeDifference(Record({"-O1"}), "a", Record({"-O1"}), "b"), "");
}

TEST(ExplainTest, DriftListsInputsUnderSeveralKeys) {
  std::vector<CachedKey> cached = {
      {"k2", Record({"--target=trn2", "-O3"})},
      {"k1", Record({"--target=trn2", "-O1"})},
      {"k3", Record({"-O1"}, "2.19.1", std::string(64, 'c'))},
      {"k4", v1::KeyInputsRecord()},  // an entry without a record
  };
  std::vector<Drift> drift = FindDrift(cached);
  ASSERT_EQ(drift.size(), 1u);
  EXPECT_EQ(drift[0].input_sha256, std::string(64, 'a'));
  ASSERT_EQ(drift[0].keys.size(), 2u);
  EXPECT_EQ(drift[0].keys[0].key, "k1");
  EXPECT_EQ(drift[0].differing_flags, (std::vector<std::string>{"-O1", "-O3"}));
  EXPECT_FALSE(drift[0].versions_differ);
  EXPECT_FALSE(drift[0].targets_differ);
}

}  // namespace
}  // namespace neffd
