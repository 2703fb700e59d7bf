// TorchNeuron's layout (store/layout.h): paths, keys, and that TorchNeuron's
// clear, replayed as the spec page states it, removes artifacts only.
#include "store/layout.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

namespace fs = std::filesystem;

constexpr char kTorchNeuronKey[] = "c496e666b3b31b0b526f14746a3df645";
const std::string kNeffdKey(64, 'a');

TEST(LayoutTest, PathsAreTorchNeuronsShards) {
  EXPECT_EQ(ArtifactRelPath(Namespace::kNeff, kTorchNeuronKey),
            "c4/96/c496e666b3b31b0b526f14746a3df645.neff");
  EXPECT_EQ(ArtifactRelPath(Namespace::kHlo, "aten.add"), "at/en/aten.add.hlo");
  EXPECT_EQ(RecordsRelDir(kTorchNeuronKey),
            "c4/96/c496e666b3b31b0b526f14746a3df645.neffd");
}

TEST(LayoutTest, OtherKeysAreShardedByTheirFirstFourCharacters) {
  EXPECT_EQ(ShardDir(kNeffdKey), "aa/aa");
  EXPECT_EQ(ShardDir("k"), "k_/__");
  EXPECT_EQ(ShardDir("..ab"), "__/ab");  // never "." or ".."
  EXPECT_EQ(ArtifactRelPath(Namespace::kNeff, "k1"), "k1/__/k1.neff");
}

TEST(LayoutTest, ShardNamesAreClassified) {
  std::string key;
  EXPECT_EQ(ClassifyShardName(Namespace::kNeff, "c4/96",
                              std::string(kTorchNeuronKey) + ".neff", &key),
            ShardName::kArtifact);
  EXPECT_EQ(key, kTorchNeuronKey);
  EXPECT_EQ(
      ClassifyShardName(Namespace::kNeff, "aa/aa", kNeffdKey + ".neffd", &key),
      ShardName::kRecords);
  EXPECT_EQ(key, kNeffdKey);
  EXPECT_EQ(ClassifyShardName(Namespace::kNeff, "c4/96", ".tmp.Ab12Cd", &key),
            ShardName::kTorchNeuronTemp);
  // A key outside its shard is not this store's entry.
  EXPECT_EQ(ClassifyShardName(Namespace::kNeff, "c4/96", "cafe.neff", &key),
            ShardName::kOther);
  EXPECT_EQ(ClassifyShardName(Namespace::kNeff, "ca/fe", "cafe.neff", &key),
            ShardName::kArtifact);
  EXPECT_EQ(ClassifyShardName(Namespace::kHlo, "ca/fe", "cafe.neff", &key),
            ShardName::kOther);
  EXPECT_EQ(ClassifyShardName(Namespace::kNeff, "mo/de",
                              "model.hlo_module.pb.lock", &key),
            ShardName::kOther);
}

// The spec page's clear: every regular file ending in ".neff" removed, then
// empty shard directories two levels deep. neffd's records survive it.
TEST(LayoutTest, TorchNeuronsClearRemovesArtifactsAndNoRecord) {
  const std::string root = test_support::TestTempDir();
  const std::string records = root + "/" + RecordsRelDir(kTorchNeuronKey);
  fs::create_directories(records);
  for (const char* name :
       {"model.done", "model.log", "compile_flags.json", "neffd.lease"}) {
    std::ofstream(records + "/" + name) << "x";
  }
  std::ofstream(root + "/" + ArtifactRelPath(Namespace::kNeff, kTorchNeuronKey))
      << "neff";
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (e.is_regular_file() && e.path().extension() == ".neff") {
      fs::remove(e.path());
    }
  }
  EXPECT_FALSE(fs::exists(root + "/" +
                          ArtifactRelPath(Namespace::kNeff, kTorchNeuronKey)));
  for (const char* name :
       {"model.done", "model.log", "compile_flags.json", "neffd.lease"}) {
    EXPECT_TRUE(fs::exists(records + "/" + name)) << name;
  }
}

class JudgeEntryTest : public ::testing::Test {
 protected:
  Judgement Judge(const ArtifactSeen& artifact, const v1::DoneRecord* done,
                  absl::string_view version = "2.19") {
    return JudgeEntry(Namespace::kNeff, kTorchNeuronKey, artifact, done,
                      version);
  }
  static ArtifactSeen File(uint64_t size, ino_t inode = 7) {
    return ArtifactSeen{true, true, size, inode};
  }
  v1::DoneRecord Done(uint64_t size, const std::string& version = "2.19",
                      ino_t inode = 7) {
    v1::DoneRecord done;
    done.set_size(size);
    done.set_compiler_version(version);
    done.set_artifact_inode(inode);
    return done;
  }
};

TEST_F(JudgeEntryTest, NothingOrAnEmptyFileIsAMiss) {
  EXPECT_EQ(Judge(ArtifactSeen{}, nullptr).verdict, Verdict::kMiss);
  EXPECT_EQ(Judge(File(0), nullptr).verdict, Verdict::kMiss);
  const v1::DoneRecord done = Done(0);
  EXPECT_EQ(Judge(File(0), &done).verdict, Verdict::kMiss);
}

TEST_F(JudgeEntryTest, RecordsWithoutTheirArtifactAreAClearNotDamage) {
  const v1::DoneRecord done = Done(4);
  EXPECT_EQ(Judge(ArtifactSeen{}, &done).verdict, Verdict::kCleared);
}

TEST_F(JudgeEntryTest, AnUnmodifiedRanksArtifactIsAdopted) {
  EXPECT_EQ(Judge(File(4), nullptr).verdict, Verdict::kAdopt);
  // ...and again when a rank's put replaced a recorded one (new inode).
  const v1::DoneRecord done = Done(9, "2.19", /*inode=*/3);
  EXPECT_EQ(Judge(File(4, /*inode=*/8), &done).verdict, Verdict::kAdopt);
}

TEST_F(JudgeEntryTest, TheCompilerVersionIsCheckedUnlessEitherIsEmpty) {
  const v1::DoneRecord done = Done(4, "2.19");
  EXPECT_EQ(Judge(File(4), &done, "2.20").verdict, Verdict::kVersionMismatch);
  EXPECT_EQ(Judge(File(4), &done, "").verdict, Verdict::kVerify);
  const v1::DoneRecord any = Done(4, "");
  EXPECT_EQ(Judge(File(4), &any, "2.20").verdict, Verdict::kVerify);
}

TEST_F(JudgeEntryTest, DamageInPlaceIsDamage) {
  const v1::DoneRecord done = Done(4);
  Judgement j = Judge(File(5), &done);
  EXPECT_EQ(j.verdict, Verdict::kDamage);
  EXPECT_EQ(j.reason, std::string(kTorchNeuronKey) +
                          ".neff is 5 bytes; its record says 4");
  ArtifactSeen fifo = File(0);
  fifo.regular = false;
  EXPECT_EQ(Judge(fifo, &done).verdict, Verdict::kDamage);
}

}  // namespace
}  // namespace neffd
