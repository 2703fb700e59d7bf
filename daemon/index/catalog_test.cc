// Catalog's hit path over a real Store and RocksDB Index: a hot entry is
// served from memory only within the revalidation window, and only while
// nothing has dropped or rewritten it.
#include "daemon/index/catalog.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/testing/manual_clock_env.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

class CatalogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir("catalog_");
    StoreOptions options;
    options.host_id = "test";
    options.root = root_ + "/neff";
    neff_ = *Store::Open(options);
    options.root = root_ + "/hlo";
    options.ns = Namespace::kHlo;
    hlo_ = *Store::Open(options);
    index_ = *Index::Open(root_ + "/index");
    catalog_ = std::make_unique<Catalog>(neff_.get(), hlo_.get(), index_.get(),
                                         &clock_);
  }

  // Publishes `bytes` under `id_` and indexes it, as Publish does.
  void Publish(const std::string& bytes) {
    absl::StatusOr<PublishResult> published = neff_->PublishBytes(
        id_, bytes, Sha256Hex(bytes), Producer{"test", 1}, {});
    ASSERT_TRUE(published.ok()) << published.status();
    ASSERT_TRUE(catalog_->Record(id_, published->stored).ok());
  }

  bool Hit() {
    absl::StatusOr<std::optional<v1::Entry>> found = catalog_->Find(id_);
    EXPECT_TRUE(found.ok()) << found.status();
    return found.ok() && found->has_value();
  }

  std::string root_;
  ManualClockEnv clock_{absl::FromUnixSeconds(1'700'000'000)};
  const EntryKey id_ = *EntryKey::Parse("neff", "2.19", "k1");
  std::unique_ptr<Store> neff_, hlo_;
  std::unique_ptr<Index> index_;
  std::unique_ptr<Catalog> catalog_;
};

TEST_F(CatalogTest, DamageIsNoticedWhenTheWindowEnds) {
  Publish(std::string(4096, 'x'));
  ASSERT_TRUE(Hit());
  ASSERT_EQ(truncate(neff_->ArtifactPath(id_).c_str(), 100), 0);
  clock_.Advance(absl::Milliseconds(500));
  EXPECT_TRUE(Hit());  // validated 0.5 s ago: no stat yet
  clock_.Advance(absl::Milliseconds(600));
  EXPECT_FALSE(Hit());  // re-checked, quarantined by the store
  EXPECT_FALSE(Hit());
}

TEST_F(CatalogTest, ForgetEndsAHotEntryAtOnce) {
  Publish(std::string(4096, 'x'));
  ASSERT_TRUE(Hit());
  std::filesystem::remove_all(neff_->ArtifactPath(id_));
  std::filesystem::remove_all(neff_->RecordsDir(id_));
  ASSERT_TRUE(catalog_->Forget(id_).ok());
  EXPECT_FALSE(Hit());  // same instant: not served from memory
}

TEST_F(CatalogTest, HotEntriesExpireFromMemoryButStayIndexed) {
  Publish(std::string(4096, 'x'));
  ASSERT_TRUE(Hit());
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(catalog_->FlushAccessTimes().ok());
  EXPECT_TRUE(Hit());
  EXPECT_EQ(catalog_->LastServed(id_), clock_.Now());
}

}  // namespace
}  // namespace neffd
