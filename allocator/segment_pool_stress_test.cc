// Randomized stress test: 10^6 operations on NeuronSegmentPool, each checked
// against ReferencePool, a deliberately naive model of the same rules (linear
// scans over std::maps, its own rounding code). Both draw segments from
// identical deterministic fake providers, so every returned address, block
// size and statistic must agree exactly.

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include "allocator/segment_pool.h"
#include "allocator/testing/fake_segment_provider.h"
#include "gtest/gtest.h"

namespace neffd::allocator {
namespace {

using test_support::FakeSegmentProvider;

constexpr size_t kMiB = size_t{1} << 20;

size_t CeilTo(size_t v, size_t step) { return (v + step - 1) / step * step; }

// The rounding rule written the slow, obvious way.
size_t ReferenceRound(const SegmentAllocatorConfig& c, size_t s) {
  if (s >= c.medium_threshold) return CeilTo(s, c.segment_alignment);
  const size_t m = c.min_rounded_size;
  if (s <= m) return m;
  size_t n = 1;
  while (n * 2 <= c.roundup_power2_divisions) n *= 2;
  if (n > 1 && s <= m * n) return CeilTo(s, m);
  size_t p = 1;
  while (p * 2 <= s) p *= 2;
  return CeilTo(s, std::max<size_t>(p / n, 1));
}

class ReferencePool {
 public:
  ReferencePool(const SegmentAllocatorConfig& c, FakeSegmentProvider* p)
      : c_(c), provider_(p) {}

  struct Result {
    bool ok = false;
    uintptr_t addr = 0;
    size_t size = 0;
  };

  Result Allocate(size_t bytes) {
    if (bytes == 0) return Result{true, 0, 0};
    const size_t r = ReferenceRound(c_, bytes);
    const bool small = bytes < c_.pool_boundary;
    // Best fit: smallest (size, address) among usable free blocks.
    Segment* best_seg = nullptr;
    uintptr_t best_addr = 0;
    size_t best_size = 0;
    for (auto& [base, seg] : segments_) {
      if (seg.small != small) continue;
      for (auto& [addr, block] : seg.blocks) {
        if (block.allocated || block.size < r) continue;
        if (block.size > c_.max_split_size_bytes &&
            block.size - r > c_.max_non_split_rounding_bytes) {
          continue;
        }
        if (best_seg == nullptr || block.size < best_size ||
            (block.size == best_size && addr < best_addr)) {
          best_seg = &seg;
          best_addr = addr;
          best_size = block.size;
        }
      }
    }
    if (best_seg == nullptr) {
      size_t seg_bytes = r;
      if (small) {
        seg_bytes = std::max(c_.small_segment_size, r);
      } else if (bytes < c_.medium_threshold) {
        seg_bytes = std::max(c_.medium_segment_size, r);
      }
      absl::StatusOr<void*> got = provider_->AllocateSegment(seg_bytes);
      if (!got.ok()) {
        EmptyCache();
        ++retries;
        got = provider_->AllocateSegment(seg_bytes);
      }
      if (!got.ok()) {
        ++ooms;
        return Result();
      }
      ++device_alloc;
      best_addr = reinterpret_cast<uintptr_t>(*got);
      best_seg = &segments_[best_addr];
      best_seg->size = seg_bytes;
      best_seg->small = small;
      best_seg->blocks[best_addr] = Block{seg_bytes, false, 0};
      reserved += seg_bytes;
    }
    Block& block = best_seg->blocks[best_addr];
    const size_t remaining = block.size - r;
    const size_t threshold =
        small ? c_.small_split_threshold : c_.large_split_threshold;
    if (remaining > 0 && remaining >= threshold &&
        block.size <= c_.max_split_size_bytes) {
      best_seg->blocks[best_addr + r] = Block{remaining, false, 0};
      block.size = r;
    }
    block.allocated = true;
    block.requested = bytes;
    allocated += block.size;
    requested += bytes;
    Peaks();
    return Result{true, best_addr, block.size};
  }

  bool Free(uintptr_t addr) {
    auto seg_it = segments_.upper_bound(addr);
    if (seg_it == segments_.begin()) return false;
    --seg_it;
    auto& blocks = seg_it->second.blocks;
    auto it = blocks.find(addr);
    if (it == blocks.end() || !it->second.allocated) return false;
    allocated -= it->second.size;
    requested -= it->second.requested;
    it->second.allocated = false;
    auto next = std::next(it);
    if (next != blocks.end() && !next->second.allocated) {
      it->second.size += next->second.size;
      blocks.erase(next);
    }
    if (it != blocks.begin()) {
      auto prev = std::prev(it);
      if (!prev->second.allocated) {
        prev->second.size += it->second.size;
        blocks.erase(it);
      }
    }
    return true;
  }

  void EmptyCache() {
    for (auto it = segments_.begin(); it != segments_.end();) {
      const auto& blocks = it->second.blocks;
      if (blocks.size() == 1 && !blocks.begin()->second.allocated) {
        ASSERT_TRUE(provider_
                        ->FreeSegment(reinterpret_cast<void*>(it->first),
                                      it->second.size)
                        .ok());
        reserved -= it->second.size;
        ++device_free;
        it = segments_.erase(it);
      } else {
        ++it;
      }
    }
  }

  int64_t InactiveSplitBytes() const {
    int64_t total = 0;
    for (const auto& [base, seg] : segments_) {
      if (seg.blocks.size() < 2) continue;
      for (const auto& [addr, block] : seg.blocks) {
        if (!block.allocated) total += block.size;
      }
    }
    return total;
  }
  int64_t segments() const { return static_cast<int64_t>(segments_.size()); }

  int64_t allocated = 0, requested = 0, reserved = 0;
  int64_t peak_allocated = 0, peak_requested = 0, peak_reserved = 0;
  int64_t retries = 0, ooms = 0, device_alloc = 0, device_free = 0;

 private:
  struct Block {
    size_t size;
    bool allocated;
    size_t requested;
  };
  struct Segment {
    size_t size = 0;
    bool small = false;
    std::map<uintptr_t, Block> blocks;
  };
  void Peaks() {
    peak_allocated = std::max(peak_allocated, allocated);
    peak_requested = std::max(peak_requested, requested);
    peak_reserved = std::max(peak_reserved, reserved);
  }

  const SegmentAllocatorConfig c_;
  FakeSegmentProvider* const provider_;
  std::map<uintptr_t, Segment> segments_;
};

// A size drawn to cover every rule: the pool boundaries exactly, small,
// medium and per-request sizes, and zero.
size_t DrawSize(std::mt19937_64& rng, const SegmentAllocatorConfig& c) {
  const int kind = static_cast<int>(rng() % 100);
  if (kind < 4) return 0;
  if (kind < 8) {
    const size_t edges[] = {c.min_rounded_size,     c.min_rounded_size + 1,
                            c.pool_boundary - 1,    c.pool_boundary,
                            c.medium_threshold - 1, c.medium_threshold};
    return edges[rng() % 6];
  }
  if (kind < 55) {  // small pool, log-uniform
    const int bits = static_cast<int>(rng() % 20);
    return std::min<size_t>(1 + rng() % (size_t{2} << bits),
                            c.pool_boundary - 1);
  }
  if (kind < 88) {
    return c.pool_boundary + rng() % (c.medium_threshold - c.pool_boundary);
  }
  return c.medium_threshold + rng() % (80 * kMiB);
}

void ExpectSameStats(const NeuronSegmentPool& pool, const ReferencePool& ref,
                     const FakeSegmentProvider& provider, bool deep) {
  const MemoryStats s = pool.GetStats();
  ASSERT_EQ(s.allocated_bytes.all().current, ref.allocated);
  ASSERT_EQ(s.requested_bytes.all().current, ref.requested);
  ASSERT_EQ(s.reserved_bytes.all().current, ref.reserved);
  ASSERT_EQ(s.allocated_bytes.all().peak, ref.peak_allocated);
  ASSERT_EQ(s.requested_bytes.all().peak, ref.peak_requested);
  ASSERT_EQ(s.reserved_bytes.all().peak, ref.peak_reserved);
  ASSERT_EQ(s.num_alloc_retries, ref.retries);
  ASSERT_EQ(s.num_ooms, ref.ooms);
  ASSERT_EQ(s.num_device_alloc, ref.device_alloc);
  ASSERT_EQ(s.num_device_free, ref.device_free);
  ASSERT_EQ(s.active_bytes.all().current, s.allocated_bytes.all().current);
  for (int t = 0; t < kNumStatTypes; ++t) {
    ASSERT_GE(s.reserved_bytes.by_type[t].current,
              s.allocated_bytes.by_type[t].current);
    ASSERT_GE(s.allocated_bytes.by_type[t].current,
              s.requested_bytes.by_type[t].current);
    ASSERT_GE(s.requested_bytes.by_type[t].current, 0);
  }
  ASSERT_EQ(static_cast<int64_t>(provider.used_bytes()),
            s.reserved_bytes.all().current);
  if (deep) {
    ASSERT_EQ(s.segment.all().current, ref.segments());
    ASSERT_EQ(s.inactive_split_bytes.all().current, ref.InactiveSplitBytes());
    ASSERT_EQ(static_cast<int64_t>(provider.live_segments()),
              s.segment.all().current);
  }
}

void RunStress(const SegmentAllocatorConfig& config, int ops, uint64_t seed,
               size_t capacity) {
  FakeSegmentProvider real_provider(capacity), ref_provider(capacity);
  auto pool = NeuronSegmentPool::Create(config, &real_provider);
  ASSERT_TRUE(pool.ok()) << pool.status();
  ReferencePool ref(config, &ref_provider);
  std::mt19937_64 rng(seed);
  std::vector<uintptr_t> live;
  constexpr size_t kTargetLive = 48;
  int64_t failed = 0, frees = 0;
  for (int i = 0; i < ops; ++i) {
    const uint64_t dice = rng() % 1000;
    if (dice == 0) {
      (*pool)->EmptyCache();
      ref.EmptyCache();
    } else if (dice == 1) {
      // A pointer that is not live: rejected, nothing changes.
      const uintptr_t bogus =
          live.empty() ? FakeSegmentProvider::kBase + 1 : live[0] + 1;
      ASSERT_EQ((*pool)->Free(reinterpret_cast<void*>(bogus)).code(),
                absl::StatusCode::kInvalidArgument);
      ASSERT_FALSE(ref.Free(bogus));
    } else if (!live.empty() &&
               rng() % (live.size() + kTargetLive) < live.size()) {
      const size_t k = rng() % live.size();
      const uintptr_t addr = live[k];
      live[k] = live.back();
      live.pop_back();
      ASSERT_TRUE((*pool)->Free(reinterpret_cast<void*>(addr)).ok());
      ASSERT_TRUE(ref.Free(addr));
      ++frees;
    } else {
      const size_t bytes = DrawSize(rng, config);
      const absl::StatusOr<Allocation> got = (*pool)->Allocate(bytes);
      const ReferencePool::Result want = ref.Allocate(bytes);
      ASSERT_EQ(got.ok(), want.ok) << "op " << i << " bytes " << bytes;
      if (!got.ok()) {
        ASSERT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted);
        ++failed;
      } else {
        ASSERT_EQ(reinterpret_cast<uintptr_t>(got->ptr), want.addr)
            << "op " << i << " bytes " << bytes;
        ASSERT_EQ(got->size, want.size) << "op " << i << " bytes " << bytes;
        if (bytes != 0) live.push_back(want.addr);
      }
    }
    ASSERT_NO_FATAL_FAILURE(
        ExpectSameStats(**pool, ref, real_provider, i % 256 == 0))
        << "after op " << i;
  }
  // Free everything: the cache then holds whole segments only.
  for (uintptr_t addr : live) {
    ASSERT_TRUE((*pool)->Free(reinterpret_cast<void*>(addr)).ok());
    ASSERT_TRUE(ref.Free(addr));
  }
  ASSERT_NO_FATAL_FAILURE(ExpectSameStats(**pool, ref, real_provider, true));
  const MemoryStats s = (*pool)->GetStats();
  EXPECT_EQ(s.allocated_bytes.all().current, 0);
  EXPECT_EQ(s.inactive_split_bytes.all().current, 0);
  (*pool)->EmptyCache();
  EXPECT_EQ(real_provider.used_bytes(), 0u);
  EXPECT_EQ(real_provider.bad_frees(), 0);
  // The run must have exercised the OOM paths and plenty of frees.
  EXPECT_GT(s.num_alloc_retries, 0);
  EXPECT_GT(s.num_ooms, 0);
  EXPECT_GT(frees, ops / 4);
  EXPECT_GT(failed, 0);
}

void RunStressWithConfig(const char* text, int ops, uint64_t seed,
                         size_t capacity) {
  const ParsedSegmentAllocatorConfig parsed = ParseSegmentAllocatorConfig(text);
  ASSERT_TRUE(parsed.warnings.empty());
  RunStress(parsed.config, ops, seed, capacity);
}

// 10^6 operations on the defaults, then two tuned configs that
// exercise N = 1 and N = 8, the max-split pair and other thresholds.
TEST(SegmentPoolStress, DefaultConfigMatchesReference) {
  RunStress(SegmentAllocatorConfig(), 1000000, 1, 1024 * kMiB);
}

TEST(SegmentPoolStress, PowerOfTwoAndMaxSplitMatchesReference) {
  RunStressWithConfig(
      "kRoundupPower2Divisions=1,kMaxSplitSizeBytes=67108864,"
      "kMaxNonSplitRoundingBytes=8388608,kSmallSplitThreshold=4096,"
      "kLargeSplitThreshold=4194304",
      200000, 2, 1024 * kMiB);
}

TEST(SegmentPoolStress, EightDivisionsOtherBoundariesMatchesReference) {
  RunStressWithConfig(
      "kRoundupPower2Divisions=8,kMinRoundedSize=512,kPoolBoundary=524288,"
      "kSmallSegmentSize=1048576,kMediumThreshold=8388608,"
      "kMediumSegmentSize=33554432,kSegmentAlignment=1048576",
      200000, 3, 768 * kMiB);
}

}  // namespace
}  // namespace neffd::allocator
