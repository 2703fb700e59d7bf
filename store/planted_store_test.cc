// Files planted in the shared store (issue 18): whatever stands at the
// artifact, model.done or compile_flags.json, the store answers at once,
// never serves it, quarantines it when allowed to, and a fresh publish of the
// key succeeds.
#include <sys/stat.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/file_util.h"
#include "store/store.h"
#include "store/testing/fault_injection_env.h"
#include "tests/harness/planted.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

namespace fs = std::filesystem;
using test_support::PlantedShape;

const std::map<std::string, std::string> kMetadata = {
    {kKeyInputsMetadata, R"({"flags": ["-O1"]})"}};

class PlantedStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir();
    StoreOptions options;
    options.root = root_;
    options.host_id = "hostA";
    options.on_event = nullptr;
    store_ = *Store::Open(options);
  }

  absl::StatusOr<PublishResult> Put(const EntryKey& id,
                                    const std::string& bytes) {
    return store_->PublishBytes(id, bytes, Sha256Hex(bytes), {"hostA", 7},
                                kMetadata);
  }

  EntryKey Key(absl::string_view file, PlantedShape shape) {
    std::string key = absl::StrCat(file, "_", PlantedShapeName(shape));
    for (char& c : key) {
      if (c == '.') c = '_';
    }
    return *EntryKey::Parse("neff", "2.19.1", key);
  }

  std::string root_;
  std::unique_ptr<Store> store_;
};

TEST(OpenRegularFileTest, NamesTheShapeAndTheBound) {
  const std::string dir = test_support::TestTempDir();
  struct Case {
    PlantedShape shape;
    std::string says;
  };
  for (const Case& c : std::vector<Case>{
           {PlantedShape::kFifo, "model.done is a FIFO"},
           {PlantedShape::kSocket, "model.done is a socket"},
           {PlantedShape::kSymlinkToRoot, "model.done is a symlink"},
           {PlantedShape::kDirectory, "model.done is a directory"},
           {PlantedShape::kHugeRecord,
            "model.done is 3145728 bytes, bound 1048576"}}) {
    const std::string path = dir + "/model.done";
    fs::remove_all(path);
    test_support::Plant(path, c.shape);
    absl::StatusOr<RegularFile> opened = OpenRegularFile(path, 1 << 20);
    EXPECT_TRUE(IsDamage(opened.status())) << opened.status();
    EXPECT_TRUE(absl::StartsWith(opened.status().message(), c.says))
        << opened.status();
  }
  fs::remove_all(dir + "/model.done");
  EXPECT_TRUE(
      absl::IsNotFound(OpenRegularFile(dir + "/model.done", 1).status()));
}

// A planted file that a peer quarantines between the open and the look at
// what it is: the answer is what is there now, nothing (a miss), never the
// open's errno (seen: 32 fallback clients, "Too many levels of symbolic
// links" as UNKNOWN).
TEST(OpenRegularFileTest, PlantedFileGoneBeforeTheLookIsNotFound) {
  const std::string path = test_support::TestTempDir() + "/model.neff";
  test_support::Plant(path, PlantedShape::kSymlinkToRoot);
  FaultInjectionEnv env;
  env.Fail(FsOp::kLstat, ENOENT, "model.neff");  // moved away meanwhile
  absl::Status status = OpenRegularFile(path, 1 << 20, &env).status();
  EXPECT_TRUE(absl::IsNotFound(status)) << status;
  EXPECT_EQ(env.injected_failures(), 1);
}

TEST_F(PlantedStoreTest, PlantedArtifactOrDoneRecordIsNeverServedAndHeals) {
  for (absl::string_view file : {"model.neff", "model.done"}) {
    for (PlantedShape shape : test_support::AllPlantedShapes()) {
      SCOPED_TRACE(absl::StrCat(file, " ", PlantedShapeName(shape)));
      const EntryKey id = Key(file, shape);
      ASSERT_TRUE(Put(id, "original neff").ok());
      const std::string path = file == "model.neff"
                                   ? store_->ArtifactPath(id)
                                   : store_->PathsOf(id).done();
      const bool regular = shape == PlantedShape::kHugeRecord ||
                           shape == PlantedShape::kTruncatedRecord;
      if (file == "model.neff" && regular) {
        // Put as TorchNeuron puts: a new file renamed over the old one.
        test_support::Plant(path + ".put", shape);
        fs::rename(path + ".put", path);
      } else {
        fs::remove(path);
        test_support::Plant(path, shape);
      }
      if (file == "model.neff" && regular) {
        // A regular file put in the artifact's place is how an unmodified
        // TorchNeuron rank writes: a new artifact, adopted, not damage.
        absl::StatusOr<StoredEntry> adopted = store_->Find(id);
        ASSERT_TRUE(adopted.ok()) << adopted.status();
        EXPECT_EQ(adopted->entry.size(), fs::file_size(path));
        continue;
      }

      // A reader that may not quarantine: no hit, a typed answer, at once.
      absl::StatusOr<StoredEntry> seen =
          store_->Find(id, Store::OnDamage::kReport);
      EXPECT_FALSE(seen.ok());
      EXPECT_TRUE(absl::IsNotFound(seen.status()) ||
                  absl::IsDataLoss(seen.status()))
          << seen.status();
      // The holder quarantines it: the planted file leaves the entry.
      EXPECT_TRUE(absl::IsNotFound(store_->Find(id).status()));
      struct stat st;
      EXPECT_NE(lstat(path.c_str(), &st), 0);
      // And publishes the key afresh.
      absl::StatusOr<PublishResult> again = Put(id, "fresh neff");
      ASSERT_TRUE(again.ok()) << again.status();
      EXPECT_FALSE(again->already_cached);
      absl::StatusOr<StoredEntry> found = store_->Find(id);
      ASSERT_TRUE(found.ok()) << found.status();
      EXPECT_EQ(found->entry.sha256(), Sha256Hex("fresh neff"));
    }
  }
  EXPECT_GE(store_->quarantined(), 10u);
}

TEST_F(PlantedStoreTest, PlantedKeyInputsRecordDoesNotBlockAPublish) {
  for (PlantedShape shape : test_support::AllPlantedShapes()) {
    SCOPED_TRACE(PlantedShapeName(shape));
    const EntryKey id = Key(kKeyInputsFileName, shape);
    fs::create_directories(store_->RecordsDir(id));
    const std::string path = store_->PathsOf(id).key_inputs();
    test_support::Plant(path, shape);
    EXPECT_TRUE(absl::IsNotFound(store_->Find(id).status()));
    absl::StatusOr<PublishResult> published = Put(id, "neff");
    ASSERT_TRUE(published.ok()) << published.status();
    absl::StatusOr<std::string> inputs = ReadSmallFile(path, 1 << 20);
    ASSERT_TRUE(inputs.ok()) << inputs.status();
    EXPECT_EQ(*inputs, kMetadata.at(kKeyInputsMetadata));
  }
}

}  // namespace
}  // namespace neffd
