// PlanGc's victim order and its refusals, on lists of candidates alone.
#include "daemon/maintenance/gc_plan.h"

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace neffd {
namespace {

const absl::Time kNow = absl::FromUnixSeconds(1'800'000'000);

GcCandidate Entry(const std::string& key, uint64_t size, absl::Duration ago) {
  return GcCandidate{*EntryKey::Parse("neff", "2.19", key), size, kNow - ago};
}

class GcPlanTest : public ::testing::Test {
 protected:
  GcPlanTest() {
    goals_.now = kNow;
    goals_.recent = absl::Minutes(1);
    goals_.lag = absl::Minutes(10);
  }

  // The keys PlanGc removes, in order, and how often it asked for a cost.
  std::vector<std::string> Victims() {
    plan_ = PlanGc(candidates_, goals_, [this](const EntryKey& id) {
      ++cost_lookups_;
      auto it = compile_ms_.find(id.key());
      return it == compile_ms_.end() ? int64_t{-1} : it->second;
    });
    std::vector<std::string> keys;
    for (const GcVictim& v : plan_.victims) {
      keys.push_back(candidates_[v.candidate].id.key());
    }
    return keys;
  }

  std::vector<GcCandidate> candidates_;
  GcGoals goals_;
  std::map<std::string, int64_t> compile_ms_;
  GcPlan plan_;
  int cost_lookups_ = 0;
};

TEST_F(GcPlanTest, OverSizeRemovesLeastRecentlyUsedUntilUnderTheGoal) {
  candidates_ = {
      Entry("b", 100, absl::Hours(2)), Entry("c", 100, absl::Hours(1)),
      Entry("a", 100, absl::Hours(3)), Entry("d", 100, absl::Hours(4))};
  goals_.max_size_bytes = 250;
  EXPECT_EQ(Victims(), (std::vector<std::string>{"d", "a"}));
  EXPECT_EQ(plan_.bytes_before, 400u);
  for (const GcVictim& v : plan_.victims) {
    EXPECT_EQ(v.reason, v1::GcRemoval::OVER_SIZE);
  }
}

TEST_F(GcPlanTest, OlderThanRemovesEveryEntryUsedBeforeTheCutoffOnly) {
  candidates_ = {Entry("old", 1, absl::Hours(48)),
                 Entry("new", 1, absl::Hours(1)),
                 Entry("older", 1, absl::Hours(72))};
  goals_.cutoff = kNow - absl::Hours(24);
  EXPECT_EQ(Victims(), (std::vector<std::string>{"older", "old"}));
  EXPECT_EQ(plan_.victims[0].reason, v1::GcRemoval::OLDER_THAN);
}

TEST_F(GcPlanTest, WithinAGrainTheCheapestToRecompileGoesFirst) {
  goals_.grain = absl::Minutes(10);
  // One bucket (01:00-01:10 ago is one grain), then a colder one.
  candidates_ = {Entry("dear", 1, absl::Minutes(61)),
                 Entry("unknown", 1, absl::Minutes(62)),
                 Entry("cheap", 1, absl::Minutes(63)),
                 Entry("coldest", 1, absl::Hours(5))};
  compile_ms_ = {{"dear", 60'000}, {"cheap", 500}, {"coldest", 90'000}};
  goals_.max_size_bytes = 1;  // all but one must go
  EXPECT_EQ(Victims(), (std::vector<std::string>{"coldest", "cheap", "dear"}));
  // An unknown cost counts as the dearest: "unknown" is the one kept.
}

TEST_F(GcPlanTest, CostsAreLookedUpOnlyForTheBucketsReached) {
  candidates_ = {Entry("a", 100, absl::Hours(3)),
                 Entry("b", 100, absl::Hours(2)),
                 Entry("c", 100, absl::Hours(1))};
  goals_.max_size_bytes = 250;
  EXPECT_EQ(Victims(), (std::vector<std::string>{"a"}));
  EXPECT_EQ(cost_lookups_, 1);
  goals_.max_size_bytes = 0;  // no goal at all: nothing to do, nothing read
  cost_lookups_ = 0;
  EXPECT_TRUE(Victims().empty());
  EXPECT_EQ(cost_lookups_, 0);
}

TEST_F(GcPlanTest, LeasedAndRecentlyUsedEntriesAreNeverRemoved) {
  GcCandidate leased = Entry("leased", 100, absl::Hours(9));
  leased.leased = true;
  GcCandidate here = Entry("served-here", 100, absl::Seconds(30));
  GcCandidate journaled = Entry("journaled", 100, absl::Minutes(5));
  journaled.journaled = journaled.last_use;  // within recent + lag
  GcCandidate old_journal = Entry("old-journal", 100, absl::Hours(1));
  old_journal.journaled = old_journal.last_use;
  candidates_ = {leased, here, journaled, old_journal};
  goals_.max_size_bytes = 1;
  EXPECT_EQ(Victims(), (std::vector<std::string>{"old-journal"}));
  EXPECT_EQ(plan_.skipped_leased, 1u);
  EXPECT_EQ(plan_.skipped_recent, 2u);
}

}  // namespace
}  // namespace neffd
