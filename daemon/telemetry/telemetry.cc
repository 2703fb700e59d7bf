#include "daemon/telemetry/telemetry.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/reflection.h"
#include "proto/remote_error_causes.h"
#include "proto/stat_fields.h"
#include "store/file_util.h"

namespace neffd {
namespace {

constexpr const char* kResultNames[] = {"hit", "miss", "failed"};

std::string Escape(absl::string_view value) {
  std::string out;
  for (char c : value) {
    if (c == '\\' || c == '"') out.push_back('\\');
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out.push_back(c);
  }
  return out;
}

// Integers exactly, fractions to 9 significant digits.
std::string Number(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) {
    return absl::StrFormat("%.0f", v);
  }
  return absl::StrFormat("%.9g", v);
}

// Accumulates a text exposition, one HELP/TYPE header per family.
class Exposition {
 public:
  void Family(const std::string& name, const char* type, const char* help) {
    absl::StrAppend(&text_, "# HELP ", name, " ", help, "\n# TYPE ", name, " ",
                    type, "\n");
  }
  void Sample(const std::string& name, const std::string& labels, double v) {
    absl::StrAppend(&text_, name, labels.empty() ? "" : "{", labels,
                    labels.empty() ? "" : "}", " ", Number(v), "\n");
  }
  void Single(const std::string& name, const char* type, const char* help,
              double v) {
    Family(name, type, help);
    Sample(name, "", v);
  }
  std::string Take() { return std::move(text_); }

 private:
  std::string text_;
};

std::string Label(const char* key, absl::string_view value) {
  return absl::StrCat(key, "=\"", Escape(value), "\"");
}

}  // namespace

Histogram::Histogram(std::vector<double> bounds) {
  data_.bounds = std::move(bounds);
  data_.counts.assign(data_.bounds.size() + 1, 0);
}

void Histogram::Observe(double value) {
  absl::MutexLock lock(&mu_);
  const size_t bucket =
      std::lower_bound(data_.bounds.begin(), data_.bounds.end(), value) -
      data_.bounds.begin();
  ++data_.counts[bucket];
  ++data_.count;
  data_.sum += value;
}

Histogram::Snapshot Histogram::Read() const {
  absl::MutexLock lock(&mu_);
  return data_;
}

double Histogram::Snapshot::Quantile(double q) const {
  if (count == 0) return 0;
  const double rank = q * count;
  uint64_t seen = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (counts[i] == 0 || seen + counts[i] < rank) {
      seen += counts[i];
      continue;
    }
    const double lower = i == 0 ? 0 : bounds[i - 1];
    if (i == bounds.size()) return lower;  // +Inf bucket: its lower edge
    const double upper = bounds[i];
    return lower + (upper - lower) * (rank - seen) / counts[i];
  }
  return bounds.empty() ? 0 : bounds.back();
}

Histogram::Snapshot Histogram::Snapshot::Minus(const Snapshot& earlier) const {
  Snapshot out = *this;
  if (earlier.counts.size() != counts.size()) return out;
  for (size_t i = 0; i < counts.size(); ++i) out.counts[i] -= earlier.counts[i];
  out.count -= earlier.count;
  out.sum -= earlier.sum;
  return out;
}

Telemetry::Telemetry(Env* env)
    : env_(env),
      lock_wait_({0.001, 0.01, 0.1, 1, 10, 60, 300, 1200, 3600}),
      baseline_time_ms_(absl::ToUnixMillis(env->Now())) {}

void Telemetry::CountLookup(Namespace ns, LookupResult result) {
  ++lookups_[static_cast<int>(ns)][static_cast<int>(result)];
}

void Telemetry::CountPublish(Namespace ns, bool already_cached,
                             uint64_t bytes) {
  const int n = static_cast<int>(ns);
  ++(already_cached ? already_cached_[n] : publishes_[n]);
  if (!already_cached) publish_bytes_[n] += bytes;
}

void Telemetry::CountLock(const std::string& outcome, absl::Duration waited) {
  if (outcome == "ready") ++lock_ready_;
  lock_wait_.Observe(absl::ToDoubleSeconds(waited));
  absl::MutexLock lock(&mu_);
  for (auto& [name, count] : lock_outcomes_) {
    if (name == outcome) {
      ++count;
      return;
    }
  }
  lock_outcomes_.emplace_back(outcome, 1);
}

void Telemetry::Fill(v1::Stats* stats) const {
  uint64_t by_result[3] = {0, 0, 0};
  uint64_t publishes = 0, already = 0, bytes = 0;
  for (int n = 0; n < kNamespaces; ++n) {
    for (int r = 0; r < 3; ++r) by_result[r] += lookups_[n][r];
    publishes += publishes_[n];
    already += already_cached_[n];
    bytes += publish_bytes_[n];
  }
  stats->set_lookups(by_result[0] + by_result[1] + by_result[2]);
  stats->set_hits(by_result[0]);
  stats->set_misses(by_result[1]);
  stats->set_failed_lookups(by_result[2]);
  stats->set_publishes(publishes);
  stats->set_already_cached(already);
  stats->set_publish_bytes(bytes);
  stats->set_failures_recorded(failures_recorded_);
  stats->set_compiles_saved(by_result[0] + lock_ready_);
  stats->set_hits_local(hits_local_);
  stats->set_hits_shared(hits_shared_);
  const Histogram::Snapshot waits = lock_wait_.Read();
  stats->set_lock_wait_p50_seconds(waits.Quantile(0.5));
  stats->set_lock_wait_p99_seconds(waits.Quantile(0.99));
  absl::MutexLock lock(&mu_);
  stats->set_counting_since_unix_ms(baseline_time_ms_);
}

v1::Stats Telemetry::SinceReset(const v1::Stats& cumulative) const {
  v1::Stats out = cumulative;
  absl::MutexLock lock(&mu_);
  const google::protobuf::Reflection* r = out.GetReflection();
  const google::protobuf::Descriptor* d = out.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    if (f->cpp_type() != google::protobuf::FieldDescriptor::CPPTYPE_UINT64 ||
        f->is_repeated() || StatMetricOf(f).gauge()) {
      continue;
    }
    const uint64_t now = r->GetUInt64(out, f);
    const uint64_t then = r->GetUInt64(baseline_, f);
    r->SetUInt64(&out, f, now >= then ? now - then : 0);
  }
  const Histogram::Snapshot waits = lock_wait_.Read().Minus(wait_baseline_);
  out.set_lock_wait_p50_seconds(waits.Quantile(0.5));
  out.set_lock_wait_p99_seconds(waits.Quantile(0.99));
  out.set_counting_since_unix_ms(baseline_time_ms_);
  return out;
}

void Telemetry::Reset(const v1::Stats& cumulative) {
  Histogram::Snapshot waits = lock_wait_.Read();
  absl::MutexLock lock(&mu_);
  baseline_ = cumulative;
  wait_baseline_ = std::move(waits);
  baseline_time_ms_ = absl::ToUnixMillis(env_->Now());
}

namespace {

// Every Stats field of `section` that declares a series of its own
// (StatMetric.name), in declaration order.
void RenderStatFields(const v1::Stats& s, absl::string_view section,
                      Exposition& out) {
  const google::protobuf::Descriptor* d = s.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const google::protobuf::FieldDescriptor* f = d->field(i);
    const v1::StatMetric& metric = StatMetricOf(f);
    if (metric.name().empty() || metric.section() != section) continue;
    const std::optional<double> value = ScaledStat(s, f);
    if (!value) continue;  // not a number: neffd.proto declares none such
    out.Single(metric.name(), metric.gauge() ? "gauge" : "counter",
               metric.help().c_str(), *value);
  }
}

// The hits by tier and the S3 tier's series (docs/REMOTE.md).
void RenderRemote(const v1::Stats& s, Exposition& out) {
  out.Family("neffd_hits_total", "counter",
             "Hits by the tier that had the entry (remote: fetched from S3 "
             "into the shared store).");
  out.Sample("neffd_hits_total", Label("tier", "local"), s.hits_local());
  out.Sample("neffd_hits_total", Label("tier", "shared"), s.hits_shared());
  out.Sample("neffd_hits_total", Label("tier", "remote"), s.hits_remote());
  if (!StatSectionShown(s, "remote")) return;
  RenderStatFields(s, "remote", out);
  out.Family("neffd_remote_bytes_total", "counter",
             "Bytes moved to and from S3.");
  out.Sample("neffd_remote_bytes_total", Label("direction", "in"),
             s.remote_bytes_in());
  out.Sample("neffd_remote_bytes_total", Label("direction", "out"),
             s.remote_bytes_out());
  out.Family("neffd_remote_errors_total", "counter",
             "Failed S3 calls by cause (each a miss, never a rank's error).");
  for (const RemoteErrorCauseField& cause : kRemoteErrorCauses) {
    out.Sample("neffd_remote_errors_total", Label("cause", cause.name),
               (s.*cause.get)());
  }
  out.Single("neffd_remote_breaker_open", "gauge",
             "1 while the circuit breaker skips S3.",
             s.remote_breaker() == "open" ? 1 : 0);
}

// Cross-host coordination on etcd (with --coordinator only).
void RenderCoordinator(const v1::Stats& s, Exposition& out) {
  if (StatSectionShown(s, "etcd")) RenderStatFields(s, "etcd", out);
}

}  // namespace

std::string Telemetry::RenderPrometheus(const v1::Stats& s) const {
  Exposition out;
  out.Family("neffd_lookups_total", "counter",
             "Lookup calls by namespace and result.");
  for (Namespace ns : {Namespace::kNeff, Namespace::kHlo}) {
    for (int r = 0; r < 3; ++r) {
      out.Sample("neffd_lookups_total",
                 absl::StrCat(Label("namespace", NamespaceName(ns)), ",",
                              Label("result", kResultNames[r])),
                 lookups_[static_cast<int>(ns)][r]);
    }
  }
  out.Family("neffd_publishes_total", "counter",
             "Publish calls by namespace and outcome.");
  for (Namespace ns : {Namespace::kNeff, Namespace::kHlo}) {
    const int n = static_cast<int>(ns);
    const std::string nsl = Label("namespace", NamespaceName(ns));
    out.Sample("neffd_publishes_total",
               absl::StrCat(nsl, ",", Label("outcome", "published")),
               publishes_[n]);
    out.Sample("neffd_publishes_total",
               absl::StrCat(nsl, ",", Label("outcome", "already_cached")),
               already_cached_[n]);
  }
  out.Family("neffd_publish_bytes_total", "counter",
             "Bytes of newly published artifacts by namespace.");
  for (Namespace ns : {Namespace::kNeff, Namespace::kHlo}) {
    out.Sample("neffd_publish_bytes_total",
               Label("namespace", NamespaceName(ns)),
               publish_bytes_[static_cast<int>(ns)]);
  }
  {
    absl::MutexLock lock(&mu_);
    out.Family("neffd_lock_requests_total", "counter",
               "Lock calls by outcome.");
    for (const auto& [name, count] : lock_outcomes_) {
      out.Sample("neffd_lock_requests_total", Label("outcome", name), count);
    }
  }
  const Histogram::Snapshot waits = lock_wait_.Read();
  out.Family("neffd_lock_wait_seconds", "histogram",
             "Time a Lock call took until it was answered.");
  uint64_t cumulative = 0;
  for (size_t i = 0; i < waits.bounds.size(); ++i) {
    cumulative += waits.counts[i];
    out.Sample("neffd_lock_wait_seconds_bucket",
               Label("le", Number(waits.bounds[i])), cumulative);
  }
  out.Sample("neffd_lock_wait_seconds_bucket", Label("le", "+Inf"),
             waits.count);
  out.Sample("neffd_lock_wait_seconds_sum", "", waits.sum);
  out.Sample("neffd_lock_wait_seconds_count", "", waits.count);
  // What the last gc runs left on the stores (0 until this host swept).
  const v1::Leftovers& left = s.leftovers();
  out.Family("neffd_store_leftovers", "gauge",
             "Files and entries the store holds that are not entries, as this "
             "host's last gc run left them, by kind.");
  out.Sample("neffd_store_leftovers", Label("kind", "temp"), left.temp_files());
  out.Sample("neffd_store_leftovers", Label("kind", "quarantine"),
             left.quarantine_entries());
  out.Sample("neffd_store_leftovers", Label("kind", "trash"),
             left.trash_entries());
  out.Family("neffd_store_leftover_bytes", "gauge",
             "Bytes of the store's leftovers by kind, as this host's last gc "
             "run left them.");
  out.Sample("neffd_store_leftover_bytes", Label("kind", "temp"),
             left.temp_bytes());
  out.Sample("neffd_store_leftover_bytes", Label("kind", "quarantine"),
             left.quarantine_bytes());
  out.Sample("neffd_store_leftover_bytes", Label("kind", "trash"),
             left.trash_bytes());
  out.Family("neffd_store_entries", "gauge",
             "Entries in this host's index by namespace and compiler "
             "version.");
  for (const v1::VersionStats& v : s.versions()) {
    out.Sample("neffd_store_entries",
               absl::StrCat(Label("namespace", v.namespace_()), ",",
                            Label("compiler_version", v.compiler_version())),
               v.entries());
  }
  out.Family("neffd_store_bytes", "gauge",
             "Bytes of the entries in this host's index by namespace and "
             "compiler version.");
  for (const v1::VersionStats& v : s.versions()) {
    out.Sample("neffd_store_bytes",
               absl::StrCat(Label("namespace", v.namespace_()), ",",
                            Label("compiler_version", v.compiler_version())),
               v.bytes());
  }
  RenderStatFields(s, "", out);
  RenderRemote(s, out);
  RenderCoordinator(s, out);
  return out.Take();
}

absl::Status WriteTextfile(const std::string& path,
                           const std::string& content) {
  const size_t slash = path.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : path.substr(0, slash);
  return WriteFileAtomically(dir, path.substr(slash + 1), content, "neffd");
}

}  // namespace neffd
