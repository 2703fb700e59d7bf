#include "allocator/trace.h"

#include <fstream>
#include <sstream>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "allocator/allocator_config.h"

namespace neffd::allocator {
namespace {

absl::Status LineError(size_t line, absl::string_view what,
                       absl::string_view text) {
  return absl::InvalidArgumentError(
      absl::StrFormat("line %d: %s: '%s'", line, what, text));
}

}  // namespace

absl::StatusOr<Trace> ParseTrace(absl::string_view text) {
  Trace trace;
  struct Slot {
    uint32_t index;
    size_t live_since;  // line of the allocation; 0 when not live
  };
  absl::flat_hash_map<std::string, Slot> ids;
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || line.front() == '#') continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    const absl::string_view op = fields[0];
    if (op == "e") {
      if (fields.size() != 1) {
        return LineError(line_number, "'e' takes no fields", line);
      }
      trace.ops.push_back(TraceOp{TraceOp::kEmptyCache, 0, 0});
      continue;
    }
    if (op == "a") {
      size_t bytes = 0;
      if (fields.size() != 3 || !ParseDecimalBytes(fields[2], &bytes)) {
        return LineError(line_number,
                         "expected 'a <id> <bytes>' with decimal bytes", line);
      }
      auto [it, inserted] =
          ids.try_emplace(std::string(fields[1]),
                          Slot{static_cast<uint32_t>(trace.num_slots), 0});
      if (inserted) ++trace.num_slots;
      if (it->second.live_since != 0) {
        return LineError(
            line_number,
            absl::StrFormat("id is already live (allocated on line %d)",
                            it->second.live_since),
            line);
      }
      it->second.live_since = line_number;
      trace.ops.push_back(TraceOp{TraceOp::kAlloc, it->second.index, bytes});
      continue;
    }
    if (op == "f") {
      if (fields.size() != 2) {
        return LineError(line_number, "expected 'f <id>'", line);
      }
      auto it = ids.find(fields[1]);
      if (it == ids.end() || it->second.live_since == 0) {
        return LineError(line_number, "free of an id that is not live", line);
      }
      it->second.live_since = 0;
      trace.ops.push_back(TraceOp{TraceOp::kFree, it->second.index, 0});
      continue;
    }
    return LineError(line_number, "unknown operation (expected a, f, e or #)",
                     line);
  }
  return trace;
}

absl::StatusOr<Trace> ReadTraceFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrFormat("cannot open trace %s", path));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::InternalError(absl::StrFormat("cannot read trace %s", path));
  }
  absl::StatusOr<Trace> trace = ParseTrace(text.str());
  if (!trace.ok()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %s", path, trace.status().message()));
  }
  return trace;
}

double ReplayResult::ops_per_second() const {
  const double seconds = absl::ToDoubleSeconds(elapsed);
  return seconds > 0 ? static_cast<double>(ops) / seconds : 0.0;
}

ReplayResult ReplayTrace(const Trace& trace, NeuronSegmentPool& pool) {
  std::vector<void*> slots(trace.num_slots, nullptr);
  PoolReplayBackend backend(pool);
  ReplayResult result;
  const absl::Time start = absl::Now();
  result.failed_allocations = ReplayOps(trace, backend, slots);
  result.elapsed = absl::Now() - start;
  result.ops = static_cast<int64_t>(trace.ops.size());
  result.stats = pool.GetStats();
  return result;
}

std::vector<std::pair<std::string, int64_t>> ReplaySummary(
    const MemoryStats& s) {
  return {
      {"reserved_bytes", s.reserved_bytes.all().current},
      {"allocated_bytes", s.allocated_bytes.all().current},
      {"requested_bytes", s.requested_bytes.all().current},
      {"peak_reserved_bytes", s.reserved_bytes.all().peak},
      {"peak_allocated_bytes", s.allocated_bytes.all().peak},
      {"peak_requested_bytes", s.requested_bytes.all().peak},
      {"segment", s.segment.all().current},
      {"num_alloc_retries", s.num_alloc_retries},
      {"num_ooms", s.num_ooms},
      {"num_device_alloc", s.num_device_alloc},
      {"num_device_free", s.num_device_free},
  };
}

}  // namespace neffd::allocator
