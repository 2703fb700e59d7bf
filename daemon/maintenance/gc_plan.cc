#include "daemon/maintenance/gc_plan.h"

#include <algorithm>
#include <cstdint>

namespace neffd {
namespace {

// Entries whose last uses fall in one grain are equally cold.
int64_t Bucket(absl::Time t, absl::Duration grain) {
  if (grain <= absl::ZeroDuration()) return absl::ToUnixNanos(t);
  return absl::ToUnixNanos(t) / absl::ToInt64Nanoseconds(grain);
}

int64_t Cost(const GcCandidate& c) {
  return c.compile_ms < 0 ? INT64_MAX : c.compile_ms;
}

}  // namespace

GcPlan PlanGc(std::vector<GcCandidate>& candidates, const GcGoals& goals,
              const std::function<int64_t(const EntryKey&)>& compile_ms) {
  std::sort(candidates.begin(), candidates.end(),
            [](const GcCandidate& a, const GcCandidate& b) {
              return a.last_use < b.last_use;
            });
  GcPlan plan;
  for (const GcCandidate& c : candidates) plan.bytes_before += c.size;
  uint64_t total = plan.bytes_before;
  auto over_size = [&] {
    return goals.max_size_bytes > 0 && total > goals.max_size_bytes;
  };
  for (size_t begin = 0; begin < candidates.size();) {
    // [begin, end) is one bucket of equally cold entries.
    const int64_t bucket = Bucket(candidates[begin].last_use, goals.grain);
    size_t end = begin + 1;
    while (end < candidates.size() &&
           Bucket(candidates[end].last_use, goals.grain) == bucket) {
      ++end;
    }
    if (!over_size() && !(candidates[begin].last_use < goals.cutoff)) break;
    for (size_t i = begin; i < end; ++i) {
      candidates[i].compile_ms = compile_ms(candidates[i].id);
    }
    std::stable_sort(candidates.begin() + begin, candidates.begin() + end,
                     [](const GcCandidate& a, const GcCandidate& b) {
                       return Cost(a) < Cost(b);
                     });
    for (size_t i = begin; i < end; ++i) {
      const GcCandidate& c = candidates[i];
      const bool by_size = over_size();
      if (!by_size && !(c.last_use < goals.cutoff)) continue;
      if (c.leased) {
        ++plan.skipped_leased;
        continue;
      }
      if (goals.now - c.last_use < goals.recent ||
          goals.now - c.journaled < goals.recent + goals.lag) {
        ++plan.skipped_recent;
        continue;
      }
      plan.victims.push_back(
          {i, by_size ? v1::GcRemoval::OVER_SIZE : v1::GcRemoval::OLDER_THAN});
      total -= c.size;
    }
    begin = end;
  }
  return plan;
}

}  // namespace neffd
