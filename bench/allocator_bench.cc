// Benchmarks of the Neuron caching allocator (allocator/segment_pool.h)
// against glibc malloc/free and against a provider without caching (every
// allocation its own mmap'd segment). Results and the exact command:
// docs/BENCHMARKS.md, section "Allocator".
//
// Traces are read from $NEFFD_TRACE_DIR, else bench/traces (right for
// `bazel run` and for the root of the working tree).
//
// Debian's libabsl is built without NDEBUG, so absl::Mutex runs its deadlock
// detector on every Lock; main() turns it off as a release build of absl
// would. Set NEFFD_BENCH_DEADLOCK_DETECTION=1 to keep it on.

#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "allocator/allocator_config.h"
#include "allocator/segment_pool.h"
#include "allocator/segment_provider.h"
#include "allocator/trace.h"
#include "benchmark/benchmark.h"

namespace neffd::allocator {
namespace {

constexpr size_t kPage = 4096;

// --- Backends (the ReplayOps interface) ------------------------------------

// The pool under test, with its own host-memory provider.
class PoolBackend {
 public:
  PoolBackend() {
    auto pool = NeuronSegmentPool::Create(SegmentAllocatorConfig(), &provider_);
    if (!pool.ok()) std::abort();
    pool_ = *std::move(pool);
  }
  void* Allocate(size_t bytes) {
    absl::StatusOr<Allocation> a = pool_->Allocate(bytes);
    return a.ok() ? a->ptr : nullptr;
  }
  void Free(void* ptr) { pool_->Free(ptr).IgnoreError(); }
  void EmptyCache() { pool_->EmptyCache(); }
  double Fragmentation() const {
    const MemoryStats s = pool_->GetStats();
    return static_cast<double>(s.reserved_bytes.all().peak) /
           static_cast<double>(s.requested_bytes.all().peak);
  }

 private:
  HostMemoryProvider provider_;
  std::unique_ptr<NeuronSegmentPool> pool_;
};

// Every allocation is its own provider segment: what the cache saves.
class NoCacheBackend {
 public:
  void* Allocate(size_t bytes) {
    if (bytes == 0) return nullptr;
    const size_t rounded = (bytes + kPage - 1) / kPage * kPage;
    absl::StatusOr<void*> p = provider_.AllocateSegment(rounded);
    if (!p.ok()) return nullptr;
    live_[*p] = {rounded, bytes};
    reserved_ += rounded;
    requested_ += bytes;
    peak_reserved_ = std::max(peak_reserved_, reserved_);
    peak_requested_ = std::max(peak_requested_, requested_);
    return *p;
  }
  void Free(void* ptr) {
    auto it = live_.find(ptr);
    reserved_ -= it->second.first;
    requested_ -= it->second.second;
    provider_.FreeSegment(ptr, it->second.first).IgnoreError();
    live_.erase(it);
  }
  void EmptyCache() {}
  double Fragmentation() const {
    return static_cast<double>(peak_reserved_) /
           static_cast<double>(peak_requested_);
  }

 private:
  HostMemoryProvider provider_;
  absl::flat_hash_map<void*, std::pair<size_t, size_t>> live_;
  size_t reserved_ = 0, requested_ = 0, peak_reserved_ = 0, peak_requested_ = 0;
};

class MallocBackend {
 public:
  void* Allocate(size_t bytes) {
    return bytes == 0 ? nullptr : std::malloc(bytes);
  }
  void Free(void* ptr) { std::free(ptr); }
  void EmptyCache() {}
  double Fragmentation() const { return 0; }  // not observable
};

// --- Warm allocate+free pairs ----------------------------------------------

template <typename Backend>
void BM_WarmPair(benchmark::State& state) {
  Backend backend;
  const size_t size = static_cast<size_t>(state.range(0));
  backend.Free(backend.Allocate(size));  // warm
  for (auto _ : state) {
    void* p = backend.Allocate(size);
    benchmark::DoNotOptimize(p);
    backend.Free(p);
  }
}
#define PAIR_SIZES Arg(512)->Arg(64 << 10)->Arg(4 << 20)->Arg(32 << 20)
BENCHMARK_TEMPLATE(BM_WarmPair, PoolBackend)->PAIR_SIZES;
BENCHMARK_TEMPLATE(BM_WarmPair, MallocBackend)->PAIR_SIZES;
BENCHMARK_TEMPLATE(BM_WarmPair, NoCacheBackend)->PAIR_SIZES;

// Eight threads on one device pool.
PoolBackend& SharedPool() {
  static PoolBackend* pool = new PoolBackend();
  return *pool;
}

void BM_WarmPairShared_Pool(benchmark::State& state) {
  PoolBackend& pool = SharedPool();
  const size_t size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = pool.Allocate(size);
    benchmark::DoNotOptimize(p);
    pool.Free(p);
  }
}
BENCHMARK(BM_WarmPairShared_Pool)
    ->Arg(512)
    ->Arg(4 << 20)
    ->Threads(8)
    ->UseRealTime();

void BM_WarmPairShared_Malloc(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  for (auto _ : state) {
    void* p = std::malloc(size);
    benchmark::DoNotOptimize(p);
    std::free(p);
  }
}
BENCHMARK(BM_WarmPairShared_Malloc)
    ->Arg(512)
    ->Arg(4 << 20)
    ->Threads(8)
    ->UseRealTime();

// --- Mixed sizes -------------------------------------------------------------

// 64 live allocations; each iteration frees the oldest and allocates a size
// drawn log-uniformly from 256 B to 32 MiB.
template <typename Backend>
void BM_MixedSizes(benchmark::State& state) {
  constexpr size_t kLive = 64, kSizes = 1 << 14;
  std::mt19937_64 rng(42);
  std::vector<size_t> sizes(kSizes);
  for (size_t& s : sizes) {
    const int bits = 8 + static_cast<int>(rng() % 18);
    s = (size_t{1} << bits) + rng() % (size_t{1} << bits);
  }
  Backend backend;
  std::vector<void*> live(kLive, nullptr);
  size_t i = 0;
  for (auto _ : state) {
    void*& slot = live[i % kLive];
    if (slot != nullptr) backend.Free(slot);
    slot = backend.Allocate(sizes[i % kSizes]);
    benchmark::DoNotOptimize(slot);
    ++i;
  }
  for (void* p : live) {
    if (p != nullptr) backend.Free(p);
  }
}
BENCHMARK_TEMPLATE(BM_MixedSizes, PoolBackend);
BENCHMARK_TEMPLATE(BM_MixedSizes, MallocBackend);
BENCHMARK_TEMPLATE(BM_MixedSizes, NoCacheBackend);

// --- Trace replays
// ------------------------------------------------------------

const char* const kTraces[] = {"steady_transformer", "varlen", "moe"};

const Trace* LoadTrace(const std::string& name) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* cache = new std::map<std::string, Trace>();
  absl::MutexLock lock(&mu);
  auto it = cache->find(name);
  if (it != cache->end()) return &it->second;
  const char* dir = std::getenv("NEFFD_TRACE_DIR");
  absl::StatusOr<Trace> t = ReadTraceFile(
      std::string(dir ? dir : "bench/traces") + "/" + name + ".trace");
  if (!t.ok()) return nullptr;
  return &cache->emplace(name, *std::move(t)).first->second;
}

// Replays the trace and frees what it left live; the operations done.
template <typename Backend>
int64_t ReplayOnce(const Trace& trace, Backend& backend,
                   std::vector<void*>& slots) {
  ReplayOps(trace, backend, slots);
  int64_t ops = static_cast<int64_t>(trace.ops.size());
  for (void*& p : slots) {
    if (p != nullptr) {
      backend.Free(p);
      p = nullptr;
      ++ops;
    }
  }
  return ops;
}

// A cold replay on a fresh backend gives the fragmentation ratio
// peak_reserved / peak_requested; the timed replays then run warm.
template <typename Backend>
void BM_Trace(benchmark::State& state) {
  const Trace* trace = LoadTrace(kTraces[state.range(0)]);
  if (trace == nullptr) {
    state.SkipWithError("trace not found: set NEFFD_TRACE_DIR");
    return;
  }
  state.SetLabel(kTraces[state.range(0)]);
  Backend backend;
  std::vector<void*> slots(trace->num_slots, nullptr);
  const int64_t ops = ReplayOnce(*trace, backend, slots);
  const double fragmentation = backend.Fragmentation();
  for (auto _ : state) ReplayOnce(*trace, backend, slots);
  // Seconds per operation (printed with an SI prefix, e.g. "52n" = 52 ns).
  state.counters["time_per_op"] = benchmark::Counter(
      static_cast<double>(ops), benchmark::Counter::kIsIterationInvariantRate |
                                    benchmark::Counter::kInvert);
  if (fragmentation > 0) state.counters["frag"] = fragmentation;
}
#define TRACES DenseRange(0, 2)->Unit(benchmark::kMillisecond)
BENCHMARK_TEMPLATE(BM_Trace, PoolBackend)->TRACES;
BENCHMARK_TEMPLATE(BM_Trace, MallocBackend)->TRACES;
BENCHMARK_TEMPLATE(BM_Trace, NoCacheBackend)->TRACES;

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
