// GcCoordinator in process: two hosts' coordinators on one store directory
// (each with its own index, lock directory and journal), on one manual
// clock, so lease expiry and recency are decided without sleeping.
#include "daemon/cluster/gc_coordinator.h"

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/testing/manual_clock_env.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

constexpr absl::Duration kTtl = absl::Seconds(30);
constexpr absl::Duration kRecent = absl::Minutes(1);

// What one host runs: its view of the store, its index and its gc.
struct Host {
  Host(const std::string& root, const std::string& name, Env* clock) {
    StoreOptions store;
    store.host_id = name;
    store.root = root + "/neff";
    neff = *Store::Open(store);
    store.root = root + "/hlo";
    store.ns = Namespace::kHlo;
    hlo = *Store::Open(store);
    std::filesystem::create_directories(root + "/" + name);
    index = *Index::Open(root + "/" + name + "/index");
    catalog =
        std::make_unique<Catalog>(neff.get(), hlo.get(), index.get(), clock);
    MaintenanceOptions maintenance_options;
    maintenance_options.env = clock;
    maintenance_options.recent = kRecent;
    maintenance =
        std::make_unique<Maintenance>(maintenance_options, catalog.get());
    GcCoordinatorOptions gc_options;
    gc_options.host_id = name;
    gc_options.locks_dir = root + "/" + name + "/locks/.gc";
    gc_options.lease_ttl = kTtl;
    gc_options.journal_grain = absl::Minutes(1);
    gc_options.journal_min_spacing = absl::ZeroDuration();
    gc_options.host_env = clock;
    gc = std::make_unique<GcCoordinator>(gc_options, catalog.get(),
                                         maintenance.get());
  }

  std::unique_ptr<Store> neff;
  std::unique_ptr<Store> hlo;
  std::unique_ptr<Index> index;
  std::unique_ptr<Catalog> catalog;
  std::unique_ptr<Maintenance> maintenance;
  std::unique_ptr<GcCoordinator> gc;
};

class GcCoordinatorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir("gc_coordinator_");
    a_ = std::make_unique<Host>(root_, "host-a", &clock_);
    b_ = std::make_unique<Host>(root_, "host-b", &clock_);
  }

  static v1::GcRequest SizeGoal(uint64_t bytes) {
    v1::GcRequest request;
    request.set_max_size_bytes(bytes);
    return request;
  }

  ManualClockEnv clock_{absl::Now()};
  std::string root_;
  std::unique_ptr<Host> a_;
  std::unique_ptr<Host> b_;
};

TEST_F(GcCoordinatorTest, OneEvictorPerStoreUntilItsLeaseStandsStaleForTheTtl) {
  ASSERT_TRUE(a_->gc->RunNow(Namespace::kNeff, v1::GcRequest()).ok());
  EXPECT_TRUE(absl::StartsWith(a_->gc->Holder(Namespace::kNeff), "host host-a"))
      << a_->gc->Holder(Namespace::kNeff);

  absl::StatusOr<v1::GcResponse> refused =
      b_->gc->RunNow(Namespace::kNeff, v1::GcRequest());
  EXPECT_TRUE(absl::IsAborted(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(), "host host-a"))
      << refused.status();
  // The hlo store has its own lease.
  EXPECT_TRUE(b_->gc->RunNow(Namespace::kHlo, v1::GcRequest()).ok());

  // Host a stops refreshing (no keeper runs here). Not stale before a TTL
  // of b's own observation has passed...
  clock_.Advance(kTtl / 2);
  EXPECT_TRUE(absl::IsAborted(
      b_->gc->RunNow(Namespace::kNeff, v1::GcRequest()).status()));
  // ...then broken and taken.
  clock_.Advance(kTtl);
  absl::StatusOr<v1::GcResponse> taken =
      b_->gc->RunNow(Namespace::kNeff, v1::GcRequest());
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->lease_host(), "host-b");
  // Host a finds it has lost the lease and is refused in turn.
  absl::StatusOr<v1::GcResponse> lost =
      a_->gc->RunNow(Namespace::kNeff, v1::GcRequest());
  EXPECT_TRUE(absl::IsAborted(lost.status())) << lost.status();
  EXPECT_TRUE(absl::StrContains(lost.status().message(), "host host-b"))
      << lost.status();
}

TEST_F(GcCoordinatorTest, AnEntryAnotherHostServedRecentlyIsKept) {
  const EntryKey id = *EntryKey::Parse("neff", "2.19", "hot");
  const std::string bytes(1000, 'n');
  ASSERT_TRUE(
      a_->neff
          ->PublishBytes(id, bytes, Sha256Hex(bytes), Producer{"host-a", 1}, {})
          .ok());
  clock_.Advance(absl::Hours(1));  // long after the publish...
  a_->gc->NoteAccess({{id.Canonical(), clock_.Now()}});  // ...served on a
  a_->gc->Stop();  // a clean stop writes a's journal

  absl::StatusOr<v1::GcResponse> kept =
      b_->gc->RunNow(Namespace::kNeff, SizeGoal(1));
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->journals_read(), 1u);
  EXPECT_EQ(kept->removed_entries(), 0u);
  EXPECT_EQ(kept->skipped_recent(), 1u);

  // Past `recent` plus the journal's lag, a's use no longer protects it.
  clock_.Advance(kRecent + absl::Minutes(5));
  absl::StatusOr<v1::GcResponse> removed =
      b_->gc->RunNow(Namespace::kNeff, SizeGoal(1));
  ASSERT_TRUE(removed.ok()) << removed.status();
  EXPECT_EQ(removed->removed_entries(), 1u);
  ASSERT_EQ(removed->removals_size(), 1);
  EXPECT_EQ(removed->removals(0).last_use_source(), v1::GcRemoval::JOURNAL);
  EXPECT_TRUE(absl::IsNotFound(b_->neff->Find(id).status()));
}

}  // namespace
}  // namespace neffd
