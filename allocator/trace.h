// allocator/trace.h
//
// Allocation traces: a text format for replaying a workload's allocations
// against a NeuronSegmentPool (the `neuron-alloc replay` command and the
// benchmarks in bench/). One operation per line:
//
//   a <id> <bytes>    allocate <bytes> (a decimal integer) under the name <id>
//   f <id>            free the allocation named <id>
//   e                 empty the cache (NeuronSegmentPool::EmptyCache)
//   # ...             a comment; blank lines are ignored too
//
// An <id> is any token without whitespace; it may be reused once freed.
// allocator/tools/snapshot_to_trace.py writes this format from PyTorch memory
// snapshots.
//
// Functions are thread-safe; a Trace is an immutable value.

#ifndef NEFFD_ALLOCATOR_TRACE_H_
#define NEFFD_ALLOCATOR_TRACE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "allocator/memory_stats.h"
#include "allocator/segment_pool.h"

namespace neffd::allocator {

struct TraceOp {
  enum Kind : uint8_t { kAlloc, kFree, kEmptyCache };
  Kind kind;
  uint32_t slot;  // dense index of the id (kAlloc, kFree)
  size_t bytes;   // kAlloc
};

struct Trace {
  std::vector<TraceOp> ops;
  size_t num_slots = 0;  // slots are 0 .. num_slots-1
};

// Parses trace text. InvalidArgument "line N: ..." for the first malformed
// line: an unknown operation, a missing or extra field, a size that is not a
// decimal integer, an allocation of an id that is live, a free of an id that
// is not.
absl::StatusOr<Trace> ParseTrace(absl::string_view text);

// Reads and parses the file at `path`; NotFound/Internal naming the path when
// it cannot be read.
absl::StatusOr<Trace> ReadTraceFile(const std::string& path);

// Replays `trace` through any backend with
//   void* Allocate(size_t bytes)   nullptr on failure (counted, replay goes on)
//   void Free(void* ptr)
//   void EmptyCache()
// `slots` must have trace.num_slots entries; returns the failed allocations.
template <typename Backend>
int64_t ReplayOps(const Trace& trace, Backend& backend,
                  std::vector<void*>& slots) {
  int64_t failed = 0;
  for (const TraceOp& op : trace.ops) {
    switch (op.kind) {
      case TraceOp::kAlloc: {
        void* ptr = backend.Allocate(op.bytes);
        if (ptr == nullptr && op.bytes != 0) ++failed;
        slots[op.slot] = ptr;
        break;
      }
      case TraceOp::kFree:
        if (slots[op.slot] != nullptr) backend.Free(slots[op.slot]);
        slots[op.slot] = nullptr;
        break;
      case TraceOp::kEmptyCache:
        backend.EmptyCache();
        break;
    }
  }
  return failed;
}

// Adapts a NeuronSegmentPool to ReplayOps: a failed allocation is nullptr.
class PoolReplayBackend {
 public:
  explicit PoolReplayBackend(NeuronSegmentPool& pool) : pool_(pool) {}
  void* Allocate(size_t bytes) {
    absl::StatusOr<Allocation> a = pool_.Allocate(bytes);
    return a.ok() ? a->ptr : nullptr;
  }
  void Free(void* ptr) { pool_.Free(ptr).IgnoreError(); }
  void EmptyCache() { pool_.EmptyCache(); }

 private:
  NeuronSegmentPool& pool_;
};

struct ReplayResult {
  MemoryStats stats;  // at the end of the trace
  int64_t ops = 0;    // operations replayed
  int64_t failed_allocations = 0;
  absl::Duration elapsed;  // wall time of the replay alone
  double ops_per_second() const;
};

// Replays `trace` on `pool`. A failed allocation is an OOM in the pool's
// statistics and the replay goes on; its later free is skipped. Allocations
// still live at the end stay allocated.
ReplayResult ReplayTrace(const Trace& trace, NeuronSegmentPool& pool);

// The flat keys of `neuron-alloc replay`, in a fixed order: reserved_bytes,
// allocated_bytes, requested_bytes, peak_reserved_bytes,
// peak_allocated_bytes, peak_requested_bytes, segment, num_alloc_retries,
// num_ooms, num_device_alloc, num_device_free.
std::vector<std::pair<std::string, int64_t>> ReplaySummary(
    const MemoryStats& stats);

}  // namespace neffd::allocator

#endif  // NEFFD_ALLOCATOR_TRACE_H_
