#include "daemon/index/index.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace neffd {
namespace {

namespace fs = std::filesystem;

std::string FreshDir(const std::string& name) {
  std::string dir = absl::StrCat(getenv("TEST_TMPDIR"), "/", name);
  fs::remove_all(dir);
  return dir;
}

v1::IndexRecord Record(const std::string& path, uint64_t size) {
  v1::IndexRecord r;
  r.mutable_entry()->set_path(path);
  r.mutable_entry()->set_size(size);
  r.set_verified_inode(42);
  return r;
}

TEST(IndexTest, RecordsAndTotalsSurviveReopen) {
  const std::string dir = FreshDir("reopen");
  EntryKey a = *EntryKey::Parse("neff", "1", "a");
  EntryKey b = *EntryKey::Parse("hlo", "1", "a");
  {
    auto index = *Index::Open(dir);
    ASSERT_TRUE(index->Put(a, Record("/x/a", 100)).ok());
    ASSERT_TRUE(index->Put(b, Record("/x/b", 7)).ok());
    ASSERT_TRUE(index->Put(a, Record("/x/a2", 50)).ok());  // replaces
    EXPECT_EQ(index->totals().entries, 2u);
    EXPECT_EQ(index->totals().bytes, 57u);
  }
  auto index = *Index::Open(dir);
  EXPECT_TRUE(index->recovered_from().empty());
  EXPECT_EQ(index->totals().entries, 2u);
  EXPECT_EQ(index->totals().bytes, 57u);
  std::optional<v1::IndexRecord> got = *index->Get(a);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->entry().path(), "/x/a2");
  ASSERT_TRUE(index->Delete(b).ok());
  ASSERT_TRUE(index->Delete(b).ok());  // idempotent
  EXPECT_FALSE(index->Get(b)->has_value());
  EXPECT_EQ(index->totals().entries, 1u);
  EXPECT_EQ(index->totals().bytes, 50u);
}

TEST(IndexTest, CorruptIndexIsMovedAsideAndStartsEmpty) {
  const std::string dir = FreshDir("corrupt");
  {
    auto index = *Index::Open(dir);
    ASSERT_TRUE(
        index->Put(*EntryKey::Parse("neff", "1", "a"), Record("/a", 1)).ok());
  }
  for (const auto& f : fs::directory_iterator(dir)) {
    if (f.path().filename().string().rfind("MANIFEST", 0) == 0) {
      std::ofstream(f.path(), std::ios::trunc) << "garbage";
    }
  }
  absl::StatusOr<std::unique_ptr<Index>> index = Index::Open(dir);
  ASSERT_TRUE(index.ok()) << index.status();
  EXPECT_FALSE((*index)->recovered_from().empty());
  EXPECT_TRUE(fs::exists((*index)->recovered_from()));
  EXPECT_EQ((*index)->totals().entries, 0u);
}

}  // namespace
}  // namespace neffd
