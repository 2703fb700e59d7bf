// Fuzzes ParseTrace (allocator replay traces): a trace that parses has
// every slot in range and frees only live slots, so replaying it is safe.
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "absl/strings/string_view.h"
#include "allocator/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<neffd::allocator::Trace> trace =
      neffd::allocator::ParseTrace(text);
  if (!trace.ok()) return 0;
  std::vector<bool> live(trace->num_slots, false);
  for (const neffd::allocator::TraceOp& op : trace->ops) {
    if (op.kind == neffd::allocator::TraceOp::kEmptyCache) continue;
    if (op.slot >= trace->num_slots) std::abort();
    const bool alloc = op.kind == neffd::allocator::TraceOp::kAlloc;
    if (live[op.slot] == alloc) std::abort();
    live[op.slot] = alloc;
  }
  return 0;
}
