#include "allocator/segment_pool.h"

#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "allocator/testing/fake_segment_provider.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neffd::allocator {
namespace {

using test_support::FakeSegmentProvider;
using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

class PoolTest : public ::testing::Test {
 protected:
  void Start(const SegmentAllocatorConfig& config = SegmentAllocatorConfig(),
             size_t capacity = FakeSegmentProvider::kUnlimited,
             size_t gap = kMiB) {
    pool_.reset();
    provider_ = std::make_unique<FakeSegmentProvider>(capacity, gap);
    absl::StatusOr<std::unique_ptr<NeuronSegmentPool>> pool =
        NeuronSegmentPool::Create(config, provider_.get());
    ASSERT_TRUE(pool.ok()) << pool.status();
    pool_ = *std::move(pool);
  }
  void SetUp() override { Start(); }

  Allocation Alloc(size_t bytes) {
    absl::StatusOr<Allocation> a = pool_->Allocate(bytes);
    EXPECT_TRUE(a.ok()) << a.status();
    return a.ok() ? *a : Allocation();
  }
  void Free(const Allocation& a) { ASSERT_TRUE(pool_->Free(a.ptr).ok()); }
  static uintptr_t Addr(const Allocation& a) {
    return reinterpret_cast<uintptr_t>(a.ptr);
  }
  MemoryStats Stats() const { return pool_->GetStats(); }

  std::unique_ptr<FakeSegmentProvider> provider_;
  std::unique_ptr<NeuronSegmentPool> pool_;
};

TEST_F(PoolTest, ZeroBytesIsAnEmptyAllocationAndTouchesNothing) {
  const Allocation a = Alloc(0);
  EXPECT_TRUE(a.empty());
  EXPECT_EQ(a.size, 0u);
  EXPECT_EQ(provider_->allocate_calls(), 0);
  EXPECT_EQ(Stats().allocation.all().allocated, 0);
  EXPECT_TRUE(pool_->Free(nullptr).ok());
}

TEST_F(PoolTest, SmallRequestCarvesASmallSegment) {
  const Allocation a = Alloc(1000);
  EXPECT_EQ(a.size, 1024u);
  EXPECT_EQ(a.requested, 1000u);
  EXPECT_THAT(provider_->segment_sizes(), ElementsAre(2 * kMiB));
  const MemoryStats s = Stats();
  EXPECT_EQ(s.reserved_bytes.small_pool().current, int64_t{2 * kMiB});
  EXPECT_EQ(s.reserved_bytes.large_pool().current, 0);
  EXPECT_EQ(s.allocated_bytes.all().current, 1024);
  EXPECT_EQ(s.active_bytes.all().current, 1024);
  EXPECT_EQ(s.requested_bytes.all().current, 1000);
  EXPECT_EQ(s.segment.small_pool().current, 1);
  EXPECT_EQ(s.inactive_split_bytes.small_pool().current,
            int64_t{2 * kMiB - 1024});
  EXPECT_EQ(s.inactive_split.all().current, 1);
  EXPECT_EQ(s.num_device_alloc, 1);

  // The next small request comes from the remainder, right after `a`.
  const Allocation b = Alloc(300);
  EXPECT_EQ(Addr(b), Addr(a) + 1024);
  EXPECT_EQ(b.size, 512u);
  EXPECT_EQ(provider_->allocate_calls(), 1);
}

TEST_F(PoolTest, PoolsNeverShareSegments) {
  const Allocation small = Alloc(kMiB - 1);
  const Allocation large = Alloc(kMiB);
  EXPECT_THAT(provider_->segment_sizes(), ElementsAre(2 * kMiB, 64 * kMiB));
  Free(small);
  Free(large);
  // A free 64 MiB large-pool block does not serve a small request.
  Alloc(512);
  EXPECT_EQ(provider_->allocate_calls(), 2);
  const MemoryStats s = Stats();
  EXPECT_EQ(s.segment.small_pool().current, 1);
  EXPECT_EQ(s.segment.large_pool().current, 1);
}

TEST_F(PoolTest, MediumRequestsShareMediumSegments) {
  const Allocation a = Alloc(3 * kMiB);
  const Allocation b = Alloc(5 * kMiB);
  EXPECT_EQ(Addr(b), Addr(a) + 3 * kMiB);
  EXPECT_THAT(provider_->segment_sizes(), ElementsAre(64 * kMiB));
}

TEST_F(PoolTest, RequestsAtTheMediumThresholdGetTheirOwnSegment) {
  const Allocation a = Alloc(16 * kMiB);
  const Allocation b = Alloc(17000000);
  EXPECT_EQ(a.size, 16 * kMiB);
  EXPECT_EQ(b.size, 18 * kMiB);
  EXPECT_THAT(provider_->segment_sizes(), ElementsAre(16 * kMiB, 18 * kMiB));
  EXPECT_EQ(Stats().inactive_split_bytes.all().current, 0);
  // A freed per-request segment is cached and reused, even split for a
  // medium request.
  Free(b);
  const Allocation c = Alloc(2 * kMiB);
  EXPECT_EQ(Addr(c), Addr(b));
  EXPECT_EQ(provider_->allocate_calls(), 2);
  EXPECT_EQ(Stats().inactive_split_bytes.large_pool().current,
            int64_t{16 * kMiB});
}

TEST_F(PoolTest, BestFitIsSmallestSizeThenLowestAddress) {
  // One medium segment: [a 4M][x 1M][b 8M][y 1M][c 4M][z 1M][rest 45M].
  const Allocation a = Alloc(4 * kMiB);
  Alloc(kMiB);  // x
  const Allocation b = Alloc(8 * kMiB);
  Alloc(kMiB);  // y
  const Allocation c = Alloc(4 * kMiB);
  Alloc(kMiB);  // z
  Free(b);
  Free(c);
  Free(a);
  // 3 MiB fits a (4M), c (4M), b (8M) and the tail: a and c tie on size, a
  // has the lower address.
  const Allocation d = Alloc(3 * kMiB);
  EXPECT_EQ(Addr(d), Addr(a));
  const Allocation e = Alloc(4 * kMiB);
  EXPECT_EQ(Addr(e), Addr(c));
  const Allocation f = Alloc(6 * kMiB);
  EXPECT_EQ(Addr(f), Addr(b));
  EXPECT_EQ(provider_->allocate_calls(), 1);
}

// Small pool: split threshold 4096 in an 8 KiB segment.
TEST_F(PoolTest, SmallSplitThresholdIsInclusive) {
  SegmentAllocatorConfig c;
  c.pool_boundary = 8 * kKiB;
  c.small_segment_size = 8 * kKiB;
  c.small_split_threshold = 4 * kKiB;
  c.roundup_power2_divisions = 16;
  Start(c);
  // Remainder 4096 == threshold: split.
  const Allocation a = Alloc(4 * kKiB);
  EXPECT_EQ(a.size, 4 * kKiB);
  const Allocation b = Alloc(4 * kKiB);
  EXPECT_EQ(Addr(b), Addr(a) + 4 * kKiB);
  EXPECT_EQ(provider_->allocate_calls(), 1);
  // Remainder 3840 < threshold: the whole segment is handed out.
  const Allocation d = Alloc(4352);
  EXPECT_EQ(d.size, 8 * kKiB);
  EXPECT_EQ(d.requested, 4352u);
  EXPECT_EQ(Stats().allocated_bytes.small_pool().current, int64_t{16 * kKiB});
  EXPECT_EQ(Stats().requested_bytes.small_pool().current,
            int64_t{8 * kKiB + 4352});
}

// Large pool: split threshold 1 MiB in a 16 MiB medium segment.
TEST_F(PoolTest, LargeSplitThresholdIsInclusive) {
  SegmentAllocatorConfig c;
  c.medium_segment_size = 16 * kMiB;
  c.roundup_power2_divisions = 64;
  Start(c);
  const Allocation a = Alloc(15 * kMiB);  // remainder 1 MiB == threshold
  EXPECT_EQ(a.size, 15 * kMiB);
  const Allocation b = Alloc(kMiB);
  EXPECT_EQ(Addr(b), Addr(a) + 15 * kMiB);
  EXPECT_EQ(provider_->allocate_calls(), 1);
  const Allocation d = Alloc(15 * kMiB + 128 * kKiB);  // remainder 896 KiB
  EXPECT_EQ(d.size, 16 * kMiB);
  EXPECT_EQ(provider_->allocate_calls(), 2);
}

TEST_F(PoolTest, MaxSplitSizeAndNonSplitRoundingWorkAsAPair) {
  SegmentAllocatorConfig c;
  c.max_split_size_bytes = 64 * kMiB;
  c.max_non_split_rounding_bytes = 4 * kMiB;
  Start(c);
  // An 80 MiB block is above the cap: never split, reused only by requests
  // within 4 MiB of its size.
  Free(Alloc(80 * kMiB));
  const Allocation near = Alloc(76 * kMiB);
  EXPECT_EQ(near.size, 80 * kMiB);
  EXPECT_EQ(near.requested, 76 * kMiB);
  EXPECT_EQ(provider_->allocate_calls(), 1);
  EXPECT_EQ(Stats().allocated_bytes.all().current, int64_t{80 * kMiB});
  Free(near);
  const Allocation far = Alloc(70 * kMiB);  // would waste 10 MiB
  EXPECT_NE(Addr(far), Addr(near));
  EXPECT_EQ(far.size, 70 * kMiB);
  EXPECT_EQ(provider_->allocate_calls(), 2);
  const Allocation medium = Alloc(2 * kMiB);  // not carved from 80 MiB
  EXPECT_THAT(provider_->segment_sizes(),
              ElementsAre(80 * kMiB, 70 * kMiB, 64 * kMiB));
  // A 64 MiB block is not above the cap, so it was split, and its
  // remainder serves a per-request-sized request too.
  EXPECT_EQ(medium.size, 2 * kMiB);
  const Allocation split = Alloc(40 * kMiB);
  EXPECT_EQ(Addr(split), Addr(medium) + 2 * kMiB);
  EXPECT_EQ(provider_->allocate_calls(), 3);
  // The tolerance is inclusive (76 of 80 above); 6 MiB of waste is not.
  Free(Alloc(100 * kMiB));
  EXPECT_EQ(Alloc(94 * kMiB).size, 94 * kMiB);
  EXPECT_EQ(provider_->allocate_calls(), 5);
}

TEST_F(PoolTest, FreedNeighboursCoalesce) {
  const Allocation a = Alloc(1024);
  const Allocation b = Alloc(1024);
  const Allocation c = Alloc(1024);
  EXPECT_EQ(Stats().inactive_split.small_pool().current, 1);
  Free(a);
  Free(c);  // merges with the tail
  EXPECT_EQ(Stats().inactive_split.small_pool().current, 2);
  EXPECT_EQ(Stats().inactive_split_bytes.small_pool().current,
            int64_t{2 * kMiB - 1024});
  Free(b);  // merges with both: the whole segment again
  MemoryStats s = Stats();
  EXPECT_EQ(s.inactive_split.small_pool().current, 0);
  EXPECT_EQ(s.inactive_split_bytes.small_pool().current, 0);
  EXPECT_EQ(s.allocated_bytes.all().current, 0);
  const Allocation whole = Alloc(3000);
  EXPECT_EQ(Addr(whole), Addr(a));
  Free(whole);
  EXPECT_EQ(pool_->EmptyCache(), 2 * kMiB);
  EXPECT_EQ(provider_->live_segments(), 0u);
}

TEST_F(PoolTest, AdjacentSegmentsNeverCoalesce) {
  Start(SegmentAllocatorConfig(), FakeSegmentProvider::kUnlimited, /*gap=*/0);
  std::vector<Allocation> all;
  for (int i = 0; i < 4; ++i) all.push_back(Alloc(kMiB - 1));  // 1 MiB each
  ASSERT_EQ(provider_->allocate_calls(), 2);
  EXPECT_EQ(Addr(all[2]), Addr(all[1]) + kMiB);  // segments touch
  for (const Allocation& a : all) Free(a);
  EXPECT_EQ(pool_->EmptyCache(), 4 * kMiB);
  EXPECT_EQ(provider_->free_calls(), 2);
  EXPECT_EQ(provider_->bad_frees(), 0);
}

TEST_F(PoolTest, OutOfMemoryFlushesTheCacheAndRetriesOnce) {
  Start(SegmentAllocatorConfig(), /*capacity=*/100 * kMiB);
  Free(Alloc(1000));                        // a cached 2 MiB small segment
  Free(Alloc(kMiB));                        // a cached 64 MiB medium segment
  const Allocation big = Alloc(80 * kMiB);  // fits only with both flushed
  EXPECT_FALSE(big.empty());
  const MemoryStats s = Stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 0);
  EXPECT_EQ(s.num_device_free, 2);
  EXPECT_EQ(s.reserved_bytes.all().current, int64_t{80 * kMiB});
  EXPECT_EQ(s.segment.all().current, 1);
}

TEST_F(PoolTest, OutOfMemoryAfterTheRetryFailsWithTheNumbers) {
  Start(SegmentAllocatorConfig(), /*capacity=*/66 * kMiB);
  const Allocation small = Alloc(1000);
  const Allocation medium = Alloc(kMiB);
  // 64 MiB does not fit the 63 MiB left in the medium segment.
  const absl::StatusOr<Allocation> big = pool_->Allocate(64 * kMiB);
  ASSERT_EQ(big.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(
      std::string(big.status().message()),
      AllOf(HasSubstr("requested 67108864 bytes"),
            HasSubstr("1049600 bytes allocated"),  // 1 MiB + 1 KiB
            HasSubstr("69206016 bytes reserved"), HasSubstr("0 bytes free")));
  MemoryStats s = Stats();
  EXPECT_EQ(s.num_alloc_retries, 1);
  EXPECT_EQ(s.num_ooms, 1);
  EXPECT_EQ(s.num_device_free, 0);  // nothing was wholly free
  EXPECT_EQ(s.allocated_bytes.all().current, int64_t{kMiB + 1024});
  // The pool keeps working.
  Free(medium);
  Free(small);
  EXPECT_FALSE(Alloc(64 * kMiB + 1).empty());  // 66 MiB: flush, then fits
  s = Stats();
  EXPECT_EQ(s.num_alloc_retries, 2);
  EXPECT_EQ(s.num_ooms, 1);
}

TEST_F(PoolTest, OtherProviderErrorsPassThroughWithoutRetry) {
  provider_->FailNext(1, absl::StatusCode::kInternal);
  const absl::StatusOr<Allocation> a = pool_->Allocate(1000);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(a.status().message()),
              HasSubstr("failed to allocate 2097152 bytes"));
  EXPECT_EQ(Stats().num_alloc_retries, 0);
  EXPECT_EQ(Stats().num_ooms, 0);
  EXPECT_EQ(provider_->allocate_calls(), 1);
}

TEST_F(PoolTest, TransientOutOfMemoryIsHiddenByTheRetry) {
  provider_->FailNext(1);
  EXPECT_FALSE(Alloc(1000).empty());
  EXPECT_EQ(Stats().num_alloc_retries, 1);
  EXPECT_EQ(Stats().num_ooms, 0);
}

TEST_F(PoolTest, HugeRequestIsAnOutOfMemoryNotACrash) {
  const absl::StatusOr<Allocation> a = pool_->Allocate(~size_t{0} - 100);
  EXPECT_EQ(a.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(Stats().num_ooms, 1);
}

TEST_F(PoolTest, FreeOfAPointerThatIsNotLiveIsRejected) {
  const Allocation a = Alloc(1000);
  int local = 0;
  EXPECT_EQ(pool_->Free(&local).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool_->Free(static_cast<char*>(a.ptr) + 256).code(),
            absl::StatusCode::kInvalidArgument);
  Free(a);
  const absl::Status twice = pool_->Free(a.ptr);
  EXPECT_EQ(twice.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(twice.message()), HasSubstr("not a live allocation"));
  EXPECT_EQ(Stats().allocated_bytes.all().current, 0);
}

TEST_F(PoolTest, EmptyCacheKeepsSegmentsWithLiveBlocks) {
  const Allocation keep = Alloc(1000);
  Free(Alloc(kMiB));
  Free(Alloc(80 * kMiB));
  EXPECT_EQ(pool_->EmptyCache(), 64 * kMiB + 80 * kMiB);
  const MemoryStats s = Stats();
  EXPECT_EQ(s.segment.all().current, 1);
  EXPECT_EQ(s.reserved_bytes.all().current, int64_t{2 * kMiB});
  EXPECT_EQ(s.num_device_free, 2);
  EXPECT_EQ(provider_->used_bytes(), 2 * kMiB);
  EXPECT_EQ(pool_->EmptyCache(), 0u);
  Free(keep);
}

TEST_F(PoolTest, PeaksTrackMaximaAndReset) {
  const Allocation a = Alloc(10 * kMiB);
  const Allocation b = Alloc(20 * kMiB);  // carved from the same segment
  Free(b);
  MemoryStats s = Stats();
  EXPECT_EQ(s.allocated_bytes.all().peak, int64_t{30 * kMiB});
  EXPECT_EQ(s.allocated_bytes.all().current, int64_t{10 * kMiB});
  EXPECT_EQ(s.requested_bytes.large_pool().peak, int64_t{30 * kMiB});
  EXPECT_EQ(s.reserved_bytes.all().peak, int64_t{64 * kMiB});
  EXPECT_EQ(s.allocation.all().allocated, 2);
  EXPECT_EQ(s.allocation.all().freed, 1);
  pool_->ResetPeakStats();
  s = Stats();
  EXPECT_EQ(s.allocated_bytes.all().peak, int64_t{10 * kMiB});
  Free(a);
}

TEST_F(PoolTest, StatsDictUsesPyTorchNames) {
  Alloc(1000);
  const auto dict = MemoryStatsToDict(Stats());
  auto value = [&dict](const std::string& key) -> int64_t {
    for (const auto& [k, v] : dict) {
      if (k == key) return v;
    }
    ADD_FAILURE() << "missing " << key;
    return -1;
  };
  EXPECT_EQ(value("allocated_bytes.all.current"), 1024);
  EXPECT_EQ(value("requested_bytes.small_pool.peak"), 1000);
  EXPECT_EQ(value("reserved_bytes.large_pool.current"), 0);
  EXPECT_EQ(value("active_bytes.all.current"), 1024);
  EXPECT_EQ(value("inactive_split_bytes.all.current"),
            int64_t{2 * kMiB - 1024});
  EXPECT_EQ(value("segment.all.current"), 1);
  EXPECT_EQ(value("num_device_alloc"), 1);
  EXPECT_EQ(value("num_device_free"), 0);
  EXPECT_EQ(value("num_alloc_retries"), 0);
  EXPECT_EQ(value("num_ooms"), 0);
  EXPECT_EQ(dict.size(), 9u * 3u * 4u + 4u);
}

TEST_F(PoolTest, DestroyingThePoolReturnsEverySegment) {
  Alloc(1000);
  Alloc(5 * kMiB);
  Free(Alloc(80 * kMiB));
  ASSERT_EQ(provider_->live_segments(), 3u);
  pool_.reset();
  EXPECT_EQ(provider_->live_segments(), 0u);
  EXPECT_EQ(provider_->used_bytes(), 0u);
  EXPECT_EQ(provider_->bad_frees(), 0);
}

TEST(NeuronSegmentPoolCreate, RejectsBadConfigAndNullProvider) {
  FakeSegmentProvider provider;
  SegmentAllocatorConfig c;
  c.segment_alignment = 3;
  EXPECT_EQ(NeuronSegmentPool::Create(c, &provider).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NeuronSegmentPool::Create(SegmentAllocatorConfig(), nullptr)
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(NeuronSegmentPoolCreate, SnapshotsTheConfig) {
  FakeSegmentProvider provider;
  SegmentAllocatorConfig c;
  c.min_rounded_size = 4096;
  auto pool = NeuronSegmentPool::Create(c, &provider);
  ASSERT_TRUE(pool.ok());
  c.min_rounded_size = 1;  // later changes do not reach the pool
  EXPECT_EQ((*pool)->config().min_rounded_size, 4096u);
  EXPECT_EQ((*pool)->Allocate(1)->size, 4096u);
}

TEST(HostMemoryProvider, ReservesRealMemoryUnderACapacity) {
  HostMemoryProvider provider(8 * kMiB);
  absl::StatusOr<void*> a = provider.AllocateSegment(6 * kMiB);
  ASSERT_TRUE(a.ok());
  static_cast<char*>(*a)[0] = 1;  // really mapped
  static_cast<char*>(*a)[6 * kMiB - 1] = 2;
  EXPECT_EQ(provider.used_bytes(), 6 * kMiB);
  EXPECT_EQ(provider.FreeBytes(), 2 * kMiB);
  EXPECT_EQ(provider.AllocateSegment(4 * kMiB).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(provider.AllocateSegment(0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(provider.FreeSegment(*a, 5 * kMiB).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(provider.FreeSegment(*a, 6 * kMiB).ok());
  EXPECT_EQ(provider.live_segments(), 0u);
  EXPECT_EQ(HostMemoryProvider().FreeBytes(),
            SegmentProvider::kUnknownFreeBytes);
}

TEST(HostMemoryProvider, BacksAPoolEndToEnd) {
  HostMemoryProvider provider(256 * kMiB);
  auto pool = NeuronSegmentPool::Create(SegmentAllocatorConfig(), &provider);
  ASSERT_TRUE(pool.ok());
  std::vector<Allocation> live;
  for (size_t bytes : {size_t{100}, 64 * kKiB, 3 * kMiB, 20 * kMiB}) {
    absl::StatusOr<Allocation> a = (*pool)->Allocate(bytes);
    ASSERT_TRUE(a.ok());
    std::memset(a->ptr, 0xab, bytes);  // the whole block is usable memory
    live.push_back(*a);
  }
  // 20 MiB was carved from the 64 MiB medium segment.
  EXPECT_EQ(provider.used_bytes(), 2 * kMiB + 64 * kMiB);
  for (const Allocation& a : live) ASSERT_TRUE((*pool)->Free(a.ptr).ok());
  (*pool)->EmptyCache();
  EXPECT_EQ(provider.used_bytes(), 0u);
}

}  // namespace
}  // namespace neffd::allocator
