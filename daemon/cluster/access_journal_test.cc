#include "daemon/cluster/access_journal.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/counting_env.h"

namespace neffd {
namespace {

class AccessJournalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/access_journal_test.XXXXXX";
    root_ = mkdtemp(tmpl);
  }

  std::unique_ptr<AccessJournal> Journal(const std::string& host) {
    AccessJournalOptions options;
    options.root = root_;
    options.host_id = host;
    options.grain = absl::Minutes(10);
    options.min_spacing = absl::Seconds(10);
    options.env = &shared_;
    return std::make_unique<AccessJournal>(options);
  }

  static absl::flat_hash_map<std::string, absl::Time> Served(
      const std::string& key, absl::Time when) {
    return {{absl::StrCat("neff/2.19.1/", key), when}};
  }

  LastUses ReadAll(uint64_t* journals) {
    return AccessJournal::ReadAll(root_, "evictor", journals, &shared_);
  }

  std::string root_;
  CountingEnv shared_{Env::Default()};
  const absl::Time t0_ = absl::FromUnixSeconds(1'800'000'000);
};

TEST_F(AccessJournalTest, TheEvictorSeesTheLatestUseOnAnyHost) {
  auto a = Journal("a");
  auto b = Journal("b");
  a->Note(Served("k1", t0_));
  b->Note(Served("k1", t0_ + absl::Hours(1)));
  b->Note(Served("k2", t0_));
  b->Note({{"hlo/2.19.1/k3", t0_}});  // another store's entry
  ASSERT_TRUE(a->Flush(t0_ + absl::Hours(1)).ok());
  ASSERT_TRUE(b->Flush(t0_ + absl::Hours(1)).ok());
  uint64_t journals = 0;
  LastUses uses = ReadAll(&journals);
  EXPECT_EQ(journals, 2u);
  EXPECT_EQ(uses.size(), 2u);
  EXPECT_EQ(uses["2.19.1/k1"], t0_ + absl::Hours(1));
  EXPECT_EQ(uses["2.19.1/k2"], t0_);
}

TEST_F(AccessJournalTest, RewritesOnlyForNewsAndAtMostOncePerSpacing) {
  auto a = Journal("a");
  a->Note(Served("k1", t0_));
  ASSERT_TRUE(a->Flush(t0_).ok());
  const uint64_t after_first = shared_.metadata_ops();
  // Uses within the grain are not news: nothing is written.
  a->Note(Served("k1", t0_ + absl::Minutes(5)));
  ASSERT_TRUE(a->Flush(t0_ + absl::Minutes(5)).ok());
  EXPECT_EQ(shared_.metadata_ops(), after_first);
  // News is written at once, but at most once per spacing.
  a->Note(Served("k2", t0_ + absl::Minutes(5)));
  ASSERT_TRUE(a->Flush(t0_ + absl::Minutes(5)).ok());
  a->Note(Served("k1", t0_ + absl::Minutes(11)));
  ASSERT_TRUE(a->Flush(t0_ + absl::Minutes(5) + absl::Seconds(5)).ok());
  uint64_t journals = 0;
  EXPECT_EQ(ReadAll(&journals)["2.19.1/k1"], t0_);
  ASSERT_TRUE(a->Flush(t0_ + absl::Minutes(11)).ok());
  LastUses uses = ReadAll(&journals);
  EXPECT_EQ(uses["2.19.1/k1"], t0_ + absl::Minutes(11));
  EXPECT_EQ(uses["2.19.1/k2"], t0_ + absl::Minutes(5));
  EXPECT_LE(a->lag(), absl::Minutes(10) + absl::Seconds(20));
}

TEST_F(AccessJournalTest, NoJournalsYetIsNoUses) {
  uint64_t journals = 7;
  EXPECT_TRUE(ReadAll(&journals).empty());
  EXPECT_EQ(journals, 0u);
}

}  // namespace
}  // namespace neffd
