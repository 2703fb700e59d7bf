// Eight threads allocate and free concurrently on one pool (run it under
// --config=tsan too). Each block is stamped with its owner at both ends and
// checked before it is freed, so two threads ever holding overlapping blocks
// would be caught.

#include <atomic>
#include <cstdint>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "allocator/segment_pool.h"
#include "gtest/gtest.h"

namespace neffd::allocator {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr int kThreads = 8;
constexpr int kOpsPerThread = 20000;

struct Live {
  Allocation a;
  uint64_t stamp;
};

void Stamp(const Live& l) {
  std::memcpy(l.a.ptr, &l.stamp, sizeof(l.stamp));
  std::memcpy(static_cast<char*>(l.a.ptr) + l.a.requested - sizeof(l.stamp),
              &l.stamp, sizeof(l.stamp));
}

bool StampIntact(const Live& l) {
  uint64_t head = 0, tail = 0;
  std::memcpy(&head, l.a.ptr, sizeof(head));
  std::memcpy(&tail, static_cast<char*>(l.a.ptr) + l.a.requested - sizeof(tail),
              sizeof(tail));
  return head == l.stamp && tail == l.stamp;
}

size_t DrawSize(std::mt19937_64& rng) {
  const int kind = static_cast<int>(rng() % 100);
  if (kind < 70) return 16 + rng() % (kMiB - 16);    // small pool
  if (kind < 95) return kMiB + rng() % (15 * kMiB);  // medium
  return 16 * kMiB + rng() % (8 * kMiB);             // per request
}

TEST(SegmentPoolThreads, EightThreadsShareOnePool) {
  HostMemoryProvider provider;
  auto pool_or = NeuronSegmentPool::Create(SegmentAllocatorConfig(), &provider);
  ASSERT_TRUE(pool_or.ok());
  NeuronSegmentPool& pool = **pool_or;
  std::atomic<int> corrupt{0}, failures{0};
  std::atomic<bool> done{false};

  // An observer reads statistics and flushes the cache meanwhile.
  std::thread observer([&] {
    while (!done.load()) {
      const MemoryStats s = pool.GetStats();
      if (s.reserved_bytes.all().current < s.allocated_bytes.all().current ||
          s.allocated_bytes.all().current < s.requested_bytes.all().current) {
        failures.fetch_add(1);
      }
      pool.EmptyCache();
      std::this_thread::yield();
    }
  });

  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      std::vector<Live> live;
      uint64_t serial = 0;
      for (int i = 0; i < kOpsPerThread; ++i) {
        if (!live.empty() && (live.size() >= 16 || rng() % 2 == 0)) {
          const size_t k = rng() % live.size();
          if (!StampIntact(live[k])) corrupt.fetch_add(1);
          if (!pool.Free(live[k].a.ptr).ok()) failures.fetch_add(1);
          live[k] = live.back();
          live.pop_back();
          continue;
        }
        absl::StatusOr<Allocation> a = pool.Allocate(DrawSize(rng));
        if (!a.ok()) {
          failures.fetch_add(1);
          continue;
        }
        Live l{*a, (uint64_t{static_cast<unsigned>(t)} << 48) | ++serial};
        Stamp(l);
        live.push_back(l);
      }
      for (const Live& l : live) {
        if (!StampIntact(l)) corrupt.fetch_add(1);
        if (!pool.Free(l.a.ptr).ok()) failures.fetch_add(1);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  done.store(true);
  observer.join();

  EXPECT_EQ(corrupt.load(), 0);
  EXPECT_EQ(failures.load(), 0);
  const MemoryStats s = pool.GetStats();
  EXPECT_EQ(s.allocation.all().allocated, s.allocation.all().freed);
  EXPECT_EQ(s.allocated_bytes.all().current, 0);
  EXPECT_EQ(s.requested_bytes.all().current, 0);
  EXPECT_GT(s.allocation.all().allocated, kThreads * kOpsPerThread / 3);
  pool.EmptyCache();
  EXPECT_EQ(pool.GetStats().reserved_bytes.all().current, 0);
  EXPECT_EQ(provider.used_bytes(), 0u);
}

}  // namespace
}  // namespace neffd::allocator
