#include "client/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/file_util.h"

namespace neffd {
namespace {

std::string Row(absl::string_view name, uint64_t value) {
  return absl::StrCat(name, ",", value, "\n");
}

std::string Row(absl::string_view name, double value) {
  return absl::StrFormat("%s,%.6f\n", name, value);
}

absl::Status WriteTable(const std::string& path, const std::string& csv) {
  const size_t slash = path.rfind('/');
  const std::string dir = path.substr(0, slash);
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  return WriteFileAtomically(dir, path.substr(slash + 1), csv, "metrics");
}

}  // namespace

MetricsWriter::MetricsWriter(std::vector<std::string> enabled_tables,
                             std::string metrics_dir, int64_t rank)
    : dir_(std::move(metrics_dir)), rank_(rank) {
  for (const std::string& table : enabled_tables) {
    if (table == "neff_cache") neff_cache_ = true;
    if (table == "allocator") allocator_ = true;
  }
}

std::string MetricsWriter::NeffCachePath() const {
  return absl::StrCat(dir_, "/neff_cache_rank", rank_, ".csv");
}

std::string MetricsWriter::AllocatorPath() const {
  return absl::StrCat(dir_, "/allocator_rank", rank_, ".csv");
}

absl::Status MetricsWriter::Write(const CacheCounters& c,
                                  const StatsSource& allocator) const {
  if (neff_cache_) {
    const std::string csv = absl::StrCat(
        "metric,value\n", Row("lookups", c.lookups), Row("hits", c.hits),
        Row("waits", c.waits), Row("wait_seconds", c.wait_seconds),
        Row("compiles", c.compiles), Row("compile_seconds", c.compile_seconds),
        Row("fallbacks", c.fallbacks), Row("failures", c.failures),
        Row("lock_timeouts", c.lock_timeouts), Row("uncached", c.uncached));
    if (absl::Status s = WriteTable(NeffCachePath(), csv); !s.ok()) return s;
  }
  if (allocator_ && allocator) {
    std::string csv = "metric,value\n";
    for (const auto& [name, value] : allocator()) {
      absl::StrAppend(&csv, name, ",", value, "\n");
    }
    return WriteTable(AllocatorPath(), csv);
  }
  return absl::OkStatus();
}

}  // namespace neffd
