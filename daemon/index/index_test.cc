#include "daemon/index/index.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "rocksdb/db.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

namespace fs = std::filesystem;

using test_support::NewTempDir;

v1::IndexRecord Record(const std::string& path, uint64_t size) {
  v1::IndexRecord r;
  r.mutable_entry()->set_path(path);
  r.mutable_entry()->set_size(size);
  r.set_verified_inode(42);
  return r;
}

TEST(IndexTest, RecordsAndTotalsSurviveReopen) {
  const std::string dir = NewTempDir("reopen");
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

std::string Describe(const std::vector<Index::VersionTotals>& versions) {
  std::string out;
  for (const Index::VersionTotals& v : versions) {
    absl::StrAppend(&out, NamespaceName(v.ns), "/", v.compiler_version, "=",
                    v.totals.entries, ":", v.totals.bytes, " ");
  }
  return out;
}

TEST(IndexTest, VersionTotalsFollowPutsAndDeletesAndSurviveReopen) {
  const std::string dir = NewTempDir("versions");
  {
    auto index = *Index::Open(dir);
    ASSERT_TRUE(
        index->Put(*EntryKey::Parse("neff", "2.1", "a"), Record("/a", 10))
            .ok());
    ASSERT_TRUE(
        index->Put(*EntryKey::Parse("neff", "2.1", "b"), Record("/b", 5)).ok());
    ASSERT_TRUE(
        index->Put(*EntryKey::Parse("neff", "2.2", "a"), Record("/c", 1)).ok());
    ASSERT_TRUE(
        index->Put(*EntryKey::Parse("hlo", "2.1", "a"), Record("/d", 3)).ok());
    ASSERT_TRUE(
        index->Put(*EntryKey::Parse("neff", "2.1", "a"), Record("/a", 20))
            .ok());  // replaces: bytes change, entries do not
    ASSERT_TRUE(index->Delete(*EntryKey::Parse("neff", "2.2", "a")).ok());
    EXPECT_EQ(Describe(index->version_totals()), "hlo/2.1=1:3 neff/2.1=2:25 ");
  }
  auto index = *Index::Open(dir);
  EXPECT_EQ(Describe(index->version_totals()), "hlo/2.1=1:3 neff/2.1=2:25 ");
  EXPECT_EQ(index->totals().entries, 3u);
  EXPECT_EQ(index->totals().bytes, 28u);
}

TEST(IndexTest, PutAllKeepsTheTotalsOfEveryGroup) {
  const std::string dir = NewTempDir("putall");
  auto index = *Index::Open(dir);
  ASSERT_TRUE(
      index->Put(*EntryKey::Parse("neff", "1", "a"), Record("/a", 4)).ok());
  std::vector<std::pair<EntryKey, v1::IndexRecord>> records = {
      {*EntryKey::Parse("neff", "1", "a"), Record("/a", 6)},  // replaces
      {*EntryKey::Parse("neff", "1", "b"), Record("/b", 1)},
      {*EntryKey::Parse("hlo", "2", "c"), Record("/c", 2)}};
  ASSERT_TRUE(index->PutAll(records).ok());
  EXPECT_EQ(Describe(index->version_totals()), "hlo/2=1:2 neff/1=2:7 ");
  EXPECT_EQ(index->totals().entries, 3u);
  EXPECT_EQ(index->totals().bytes, 9u);
  EXPECT_EQ((*index->Get(*EntryKey::Parse("neff", "1", "a")))->entry().size(),
            6u);
}

TEST(IndexTest, IndexWithoutVersionTotalsGetsThemOnOpen) {
  const std::string dir = NewTempDir("upgrade");
  {
    auto index = *Index::Open(dir);
    ASSERT_TRUE(
        index->Put(*EntryKey::Parse("neff", "1", "a"), Record("/a", 4)).ok());
    ASSERT_TRUE(
        index->Put(*EntryKey::Parse("neff", "1", "b"), Record("/b", 6)).ok());
  }
  {  // what an index written by an older neffd holds: no version rows
    rocksdb::DB* raw = nullptr;
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    ASSERT_TRUE(rocksdb::DB::Open(
                    rocksdb::DBOptions(), dir,
                    {{rocksdb::kDefaultColumnFamilyName, {}}, {"outbox", {}}},
                    &handles, &raw)
                    .ok());
    std::unique_ptr<rocksdb::DB> db(raw);
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), "m/format").ok());
    ASSERT_TRUE(db->Delete(rocksdb::WriteOptions(), "m/v/neff/1").ok());
    for (rocksdb::ColumnFamilyHandle* h : handles) {
      db->DestroyColumnFamilyHandle(h);
    }
  }
  auto index = *Index::Open(dir);
  EXPECT_EQ(Describe(index->version_totals()), "neff/1=2:10 ");
  EXPECT_EQ(index->totals().entries, 2u);
}

TEST(IndexTest, OutboxRowsSurviveReopenAndStayOutOfTheEntries) {
  const std::string dir = NewTempDir("outbox");
  {  // an index from before the outbox: no column family for it
    rocksdb::DB* raw = nullptr;
    rocksdb::Options options;
    options.create_if_missing = true;
    ASSERT_TRUE(rocksdb::DB::Open(options, dir, &raw).ok());
    delete raw;
  }
  {
    auto index = *Index::Open(dir);
    ASSERT_TRUE(index->OutboxPut("neff/1/a", "first").ok());
    ASSERT_TRUE(index->OutboxPut("neff/1/b", "second").ok());
    ASSERT_TRUE(index->OutboxDelete("neff/1/a").ok());
    ASSERT_TRUE(
        index->Put(*EntryKey::Parse("neff", "1", "c"), Record("/c", 3)).ok());
  }
  auto index = *Index::Open(dir);
  std::string rows;
  index->OutboxForEach([&](absl::string_view key, absl::string_view value) {
    rows += absl::StrCat(key, "=", value, " ");
    return true;
  });
  EXPECT_EQ(rows, "neff/1/b=second ");
  int entries = 0;
  index->ForEach([&](const EntryKey&, const v1::IndexRecord&) {
    ++entries;
    return true;
  });
  EXPECT_EQ(entries, 1);
}

TEST(IndexTest, ForEachAfterResumesAfterTheGivenEntry) {
  const std::string dir = NewTempDir("after");
  auto index = *Index::Open(dir);
  for (const char* key : {"a", "b", "c"}) {
    ASSERT_TRUE(
        index->Put(*EntryKey::Parse("neff", "1", key), Record("/x", 1)).ok());
  }
  std::string seen;
  index->ForEachAfter("neff/1/a",
                      [&](const EntryKey& id, const v1::IndexRecord&) {
                        seen += id.key();
                        return true;
                      });
  EXPECT_EQ(seen, "bc");
}

TEST(IndexTest, CorruptIndexIsMovedAsideAndStartsEmpty) {
  const std::string dir = NewTempDir("corrupt");
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
