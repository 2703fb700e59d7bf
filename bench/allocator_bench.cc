// Benchmarks of the Neuron caching allocator (allocator/segment_pool.h)
// against glibc malloc/free and against a provider without caching.
// Results and the exact command: docs/BENCHMARKS.md, section "Allocator".
//
// Traces are read from $NEFFD_TRACE_DIR, else bench/traces (the runfiles
// layout of `bazel run` and the working tree root alike).

#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "allocator/allocator_config.h"
#include "allocator/segment_pool.h"
#include "allocator/segment_provider.h"
#include "allocator/trace.h"
#include "benchmark/benchmark.h"

namespace neffd::allocator {
namespace {

constexpr size_t kPage = 4096;

std::unique_ptr<NeuronSegmentPool> MakePool(SegmentProvider* provider) {
  absl::StatusOr<std::unique_ptr<NeuronSegmentPool>> pool =
      NeuronSegmentPool::Create(SegmentAllocatorConfig(), provider);
  if (!pool.ok()) std::abort();
  return *std::move(pool);
}

// Every allocation is its own provider segment: what the pool saves us from.
class NoCacheBackend {
 public:
  void* Allocate(size_t bytes) {
    if (bytes == 0) return nullptr;
    const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
    absl::StatusOr<void*> p = provider_.AllocateSegment(rounded);
    if (!p.ok()) return nullptr;
    sizes_[*p] = rounded;
    reserved_ += rounded;
    requested_ += bytes;
    requested_of_[*p] = bytes;
    if (reserved_ > peak_reserved_) peak_reserved_ = reserved_;
    if (requested_ > peak_requested_) peak_requested_ = requested_;
    return *p;
  }
  void Free(void* ptr) {
    const size_t rounded = sizes_[ptr];
    reserved_ -= rounded;
    requested_ -= requested_of_[ptr];
    provider_.FreeSegment(ptr, rounded).IgnoreError();
  }
  void EmptyCache() {}
  double Fragmentation() const {
    return static_cast<double>(peak_reserved_) / peak_requested_;
  }

 private:
  HostMemoryProvider provider_;
  absl::flat_hash_map<void*, size_t> sizes_, requested_of_;
  size_t reserved_ = 0, requested_ = 0, peak_reserved_ = 0, peak_requested_ = 0;
};

class MallocBackend {
 public:
  void* Allocate(size_t bytes) {
    return bytes == 0 ? nullptr : std::malloc(bytes);
  }
  void Free(void* ptr) { std::free(ptr); }
  void EmptyCache() {}
};

// --- Warm allocate+free pairs -------------------------------------------

void BM_PoolAllocFree(benchmark::State& state) {
  HostMemoryProvider provider;
  auto pool = MakePool(&provider);
  const size_t size = static_cast<size_t>(state.range(0));
  pool->Free(pool->Allocate(size)->ptr).IgnoreError();  // warm
  for (auto _ : state) {
    absl::StatusOr<Allocation> a = pool->Allocate(size);
    benchmark::DoNotOptimize(a->ptr);
    pool->Free(a->ptr).IgnoreError();
  }
}
BENCHMARK(BM_PoolAllocFree)
    ->Arg(512)
    ->Arg(64 << 10)
    ->Arg(4 << 20)
    ->Arg(32 << 20);

// All threads share one device pool.
NeuronSegmentPool& SharedPool() {
  static HostMemoryProvider* provider = new HostMemoryProvider();
  static NeuronSegmentPool* pool = MakePool(provider).release();
  return *pool;
}

void BM_PoolAllocFreeShared(benchmark::State& state) {
  NeuronSegmentPool& pool = SharedPool();
  const size_t size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    absl::StatusOr<Allocation> a = pool.Allocate(size);
    benchmark::DoNotOptimize(a->ptr);
    pool.Free(a->ptr).IgnoreError();
  }
}
BENCHMARK(BM_PoolAllocFreeShared)
    ->Arg(512)
    ->Arg(4 << 20)
    ->Threads(8)
    ->UseRealTime();

void BM_MallocFree(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = std::malloc(size);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}
BENCHMARK(BM_MallocFree)->Arg(512)->Arg(64 << 10)->Arg(4 << 20)->Arg(32 << 20);
BENCHMARK(BM_MallocFree)->Arg(512)->Arg(4 << 20)->Threads(8)->UseRealTime();

void BM_NoCacheAllocFree(benchmark::State& state) {
  NoCacheBackend backend;
  const size_t size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = backend.Allocate(size);
    benchmark::DoNotOptimize(p);
    backend.Free(p);
  }
}
BENCHMARK(BM_NoCacheAllocFree)->Arg(512)->Arg(4 << 20)->Arg(32 << 20);

}  // namespace
}  // namespace neffd::allocator

int main(int argc, char** argv) {
  if (std::getenv("NEFFD_BENCH_DEADLOCK_DETECTION") == nullptr) {
    absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
