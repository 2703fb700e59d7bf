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

TEST(LayoutTest, NeffKeysAre32Or64LowercaseHexDigits) {
  EXPECT_TRUE(ValidateLayoutKey(Namespace::kNeff, kTorchNeuronKey).ok());
  EXPECT_TRUE(ValidateLayoutKey(Namespace::kNeff, kNeffdKey).ok());
  for (const std::string& bad :
       {std::string("cafe"), std::string(31, 'a'), std::string(33, 'a'),
        std::string(32, 'A'), std::string(32, 'g'), std::string("../x")}) {
    absl::Status s = ValidateLayoutKey(Namespace::kNeff, bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad;
    EXPECT_NE(s.message().find("id.key"), absl::string_view::npos) << s;
  }
  EXPECT_TRUE(ValidateLayoutKey(Namespace::kHlo, "aten.add").ok());
  EXPECT_FALSE(ValidateLayoutKey(Namespace::kHlo, "a..b").ok());  // ".."
  EXPECT_FALSE(ValidateLayoutKey(Namespace::kHlo, "abc").ok());
}

TEST(LayoutTest, ShardNamesAreClassified) {
  std::string key;
  EXPECT_EQ(ClassifyShardName(Namespace::kNeff,
                              std::string(kTorchNeuronKey) + ".neff", &key),
            ShardName::kArtifact);
  EXPECT_EQ(key, kTorchNeuronKey);
  EXPECT_EQ(ClassifyShardName(Namespace::kNeff, kNeffdKey + ".neffd", &key),
            ShardName::kRecords);
  EXPECT_EQ(key, kNeffdKey);
  EXPECT_EQ(ClassifyShardName(Namespace::kNeff, ".tmp.Ab12Cd", &key),
            ShardName::kTorchNeuronTemp);
  EXPECT_EQ(ClassifyShardName(Namespace::kNeff, "cafe.neff", &key),
            ShardName::kOther);
  EXPECT_EQ(
      ClassifyShardName(Namespace::kNeff, "model.hlo_module.pb.lock", &key),
      ShardName::kOther);
}

// The spec page's clear: every regular file ending in ".neff" removed, then
// empty shard directories two levels deep. neffd's records survive it.
TEST(LayoutTest, TorchNeuronsClearRemovesArtifactsAndNoRecord) {
  const std::string root = test_support::TestTempDir();
  const std::string records = root + "/" + RecordsRelDir(kTorchNeuronKey);
  fs::create_directories(records);
  for (const char* name : {"done", "log", "compile_flags.json", "lease"}) {
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
  for (const char* name : {"done", "log", "compile_flags.json", "lease"}) {
    EXPECT_TRUE(fs::exists(records + "/" + name)) << name;
  }
}

}  // namespace
}  // namespace neffd
