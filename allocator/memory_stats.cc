#include "allocator/memory_stats.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace neffd::allocator {

std::vector<std::pair<std::string, int64_t>> MemoryStatsToDict(
    const MemoryStats& stats) {
  std::vector<std::pair<std::string, int64_t>> out;
  const std::pair<const char*, const StatArray*> arrays[] = {
      {"allocation", &stats.allocation},
      {"segment", &stats.segment},
      {"active", &stats.active},
      {"inactive_split", &stats.inactive_split},
      {"allocated_bytes", &stats.allocated_bytes},
      {"reserved_bytes", &stats.reserved_bytes},
      {"active_bytes", &stats.active_bytes},
      {"inactive_split_bytes", &stats.inactive_split_bytes},
      {"requested_bytes", &stats.requested_bytes},
  };
  const char* const type_names[kNumStatTypes] = {"all", "small_pool",
                                                 "large_pool"};
  for (const auto& [name, array] : arrays) {
    for (int t = 0; t < kNumStatTypes; ++t) {
      const Stat& s = array->by_type[t];
      const std::string base = absl::StrCat(name, ".", type_names[t], ".");
      out.emplace_back(absl::StrCat(base, "current"), s.current);
      out.emplace_back(absl::StrCat(base, "peak"), s.peak);
      out.emplace_back(absl::StrCat(base, "allocated"), s.allocated);
      out.emplace_back(absl::StrCat(base, "freed"), s.freed);
    }
  }
  out.emplace_back("num_alloc_retries", stats.num_alloc_retries);
  out.emplace_back("num_ooms", stats.num_ooms);
  out.emplace_back("num_device_alloc", stats.num_device_alloc);
  out.emplace_back("num_device_free", stats.num_device_free);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace neffd::allocator
