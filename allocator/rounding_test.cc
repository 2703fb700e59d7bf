#include "allocator/rounding.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include "gtest/gtest.h"

namespace neffd::allocator {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;

SegmentAllocatorConfig WithDivisions(size_t n) {
  SegmentAllocatorConfig c;
  c.roundup_power2_divisions = n;
  return c;
}

size_t Rounded(const SegmentAllocatorConfig& c, size_t s) {
  absl::StatusOr<size_t> r = RoundSize(c, s);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : 0;
}

using Row = std::pair<size_t, size_t>;  // requested, rounded

void ExpectTable(const SegmentAllocatorConfig& c,
                 const std::vector<Row>& rows) {
  for (const auto& [requested, rounded] : rows) {
    EXPECT_EQ(Rounded(c, requested), rounded) << "requested " << requested;
  }
}

TEST(RoundSize, ZeroIsZero) {
  EXPECT_EQ(Rounded(SegmentAllocatorConfig(), 0), 0u);
}

// N = 1: pure power-of-two rounding above m = 256.
TEST(RoundSize, OneDivisionIsPowerOfTwo) {
  ExpectTable(WithDivisions(1),
              {{1, 256},
               {255, 256},
               {256, 256},
               {257, 512},
               {300, 512},
               {512, 512},
               {513, 1024},
               {1025, 2048},
               {3000, 4096},
               {4096, 4096},
               {kMiB - 1, kMiB},
               {kMiB, kMiB},
               {kMiB + 1, 2 * kMiB},
               {16 * kMiB - 1, 16 * kMiB},
               // At and above kMediumThreshold: multiples of 2 MiB.
               {16 * kMiB, 16 * kMiB},
               {16 * kMiB + 1, 18 * kMiB},
               {33 * kMiB, 34 * kMiB}});
}

// N = 4 (the default): multiples of 256 up to 1 KiB, then quarters.
TEST(RoundSize, FourDivisions) {
  ExpectTable(WithDivisions(4), {{1, 256},
                                 {256, 256},
                                 {257, 512},
                                 {768, 768},
                                 {769, 1024},
                                 {1024, 1024},  // m * N: still a multiple of m
                                 {1025, 1280},  // 1024 / 4 = 256 steps
                                 {1281, 1536},
                                 {2047, 2048},
                                 {2048, 2048},
                                 {2049, 2560},  // 2048 / 4 = 512 steps
                                 {5000, 5120},
                                 {kMiB - 1, kMiB},
                                 {kMiB, kMiB},
                                 {kMiB + 1, kMiB + 256 * kKiB},
                                 {3 * kMiB - 1, 3 * kMiB},
                                 {16 * kMiB - 1, 16 * kMiB},
                                 {16 * kMiB, 16 * kMiB},
                                 {16 * kMiB + 1, 18 * kMiB},
                                 {17000000, 18 * kMiB}});
}

// N = 8: multiples of 256 up to 2 KiB, then eighths.
TEST(RoundSize, EightDivisions) {
  ExpectTable(WithDivisions(8), {{1, 256},
                                 {257, 512},
                                 {1025, 1280},  // still <= m * N = 2048
                                 {2047, 2048},
                                 {2048, 2048},
                                 {2049, 2304},  // 2048 / 8 = 256 steps
                                 {4097, 4608},  // 4096 / 8 = 512 steps
                                 {kMiB + 1, kMiB + 128 * kKiB},
                                 {15 * kMiB + 1, 16 * kMiB},
                                 {16 * kMiB, 16 * kMiB},
                                 {16 * kMiB + 1, 18 * kMiB}});
}

TEST(RoundSize, NonPowerOfTwoDivisionsRoundLikeTheLowerPower) {
  const SegmentAllocatorConfig five = WithDivisions(5);
  const SegmentAllocatorConfig four = WithDivisions(4);
  for (size_t s : {1, 257, 1025, 2049, 5000, 123456, 9999999}) {
    EXPECT_EQ(Rounded(five, s), Rounded(four, s)) << s;
  }
}

TEST(RoundSize, MinRoundedSizeAndAlignmentAreHonoured) {
  SegmentAllocatorConfig c;
  c.min_rounded_size = 4096;
  c.segment_alignment = 64 * kMiB;
  ExpectTable(c, {{1, 4096},
                  {4097, 8192},
                  {16384, 16384},  // <= m * N
                  {16385, 20480},  // 16384 / 4
                  {16 * kMiB, 64 * kMiB},
                  {65 * kMiB, 128 * kMiB}});
}

TEST(RoundSize, OverflowIsResourceExhausted) {
  const absl::StatusOr<size_t> r =
      RoundSize(SegmentAllocatorConfig(), ~size_t{0} - 5);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kResourceExhausted);
}

// The guarantees stated in the header, over random sizes and every N.
TEST(RoundSize, PropertiesHoldForEveryDivisionCount) {
  std::mt19937_64 rng(7);
  for (size_t n : {1, 2, 4, 8, 16, 32, 64}) {
    const SegmentAllocatorConfig c = WithDivisions(n);
    size_t previous_r = 0;
    std::vector<size_t> sizes;
    for (int i = 0; i < 20000; ++i) {
      const int bits = 1 + static_cast<int>(rng() % 26);
      sizes.push_back(1 + rng() % (size_t{1} << bits));
    }
    std::sort(sizes.begin(), sizes.end());
    for (size_t s : sizes) {
      const size_t r = Rounded(c, s);
      ASSERT_GE(r, s);
      ASSERT_EQ(r % 256, 0u) << "n=" << n << " s=" << s;
      ASSERT_GE(r, previous_r) << "monotonic at " << s;
      if (s < c.medium_threshold && s > 256 * n) {
        ASSERT_LE(r - s, s / n) << "n=" << n << " s=" << s;  // waste <= 1/N
      }
      if (s >= c.medium_threshold) {
        ASSERT_EQ(r % c.segment_alignment, 0u);
      }
      previous_r = r;
    }
    // Powers of two stay as they are.
    for (size_t p = 256; p < c.medium_threshold; p <<= 1) {
      ASSERT_EQ(Rounded(c, p), p);
    }
  }
}

TEST(PlaceRequest, PoolsAndSegmentsFollowTheRequestedSize) {
  const SegmentAllocatorConfig c;
  struct Case {
    size_t requested;
    PoolKind pool;
    SegmentKind segment;
    size_t segment_bytes;
  };
  for (const Case& k : std::vector<Case>{
           {1, PoolKind::kSmall, SegmentKind::kSmall, 2 * kMiB},
           {kMiB - 1, PoolKind::kSmall, SegmentKind::kSmall, 2 * kMiB},
           {kMiB, PoolKind::kLarge, SegmentKind::kMedium, 64 * kMiB},
           {16 * kMiB - 1, PoolKind::kLarge, SegmentKind::kMedium, 64 * kMiB},
           {16 * kMiB, PoolKind::kLarge, SegmentKind::kPerRequest, 16 * kMiB},
           {16 * kMiB + 1, PoolKind::kLarge, SegmentKind::kPerRequest,
            18 * kMiB},
           {100 * kMiB + 3, PoolKind::kLarge, SegmentKind::kPerRequest,
            102 * kMiB}}) {
    SCOPED_TRACE(k.requested);
    absl::StatusOr<Placement> p = PlaceRequest(c, k.requested);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->requested, k.requested);
    EXPECT_EQ(p->pool, k.pool);
    EXPECT_EQ(p->segment, k.segment);
    EXPECT_EQ(p->segment_bytes, k.segment_bytes);
  }
  EXPECT_STREQ(PoolKindName(PoolKind::kLarge), "large");
  EXPECT_STREQ(SegmentKindName(SegmentKind::kPerRequest), "per_request");
}

TEST(PlaceRequest, SegmentIsNeverSmallerThanTheRoundedRequest) {
  // A boundary that is not a power of two lets a small request round past
  // the small segment size.
  SegmentAllocatorConfig c;
  c.pool_boundary = 1000000;
  c.small_segment_size = 1000000;
  absl::StatusOr<Placement> p = PlaceRequest(c, 999999);
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->pool, PoolKind::kSmall);
  EXPECT_EQ(p->rounded, kMiB);
  EXPECT_EQ(p->segment_bytes, kMiB);
}

}  // namespace
}  // namespace neffd::allocator
