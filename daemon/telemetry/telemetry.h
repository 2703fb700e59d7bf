// daemon/telemetry/telemetry.h
//
// Telemetry holds the daemon's counters and histograms (everything GetStats
// and the Prometheus textfile report that is not read from the lock table,
// the index or the stores), and turns a cumulative v1::Stats into:
//   - the operator's view since the last ResetStats (`neffctl stats -z`),
//     by subtracting a baseline: counters only; gauges are never reset;
//   - Prometheus text exposition format (RenderPrometheus), whose counters
//     never reset, as Prometheus expects.
// WriteFileAtomically-style textfile output (write a temp file in the same
// directory, fsync, rename) follows node_exporter's textfile collector
// convention, so the collector never reads half a file.
//
// Thread-safe: counters are atomics; the histogram and baseline take a mutex.
#ifndef NEFFD_DAEMON_TELEMETRY_TELEMETRY_H_
#define NEFFD_DAEMON_TELEMETRY_TELEMETRY_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "store/entry_id.h"
#include "store/env.h"

namespace neffd {

// A Prometheus-style histogram over fixed upper bounds (seconds).
class Histogram {
 public:
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> counts;  // per bucket, the last one is +Inf
    uint64_t count = 0;
    double sum = 0;
    // The q-quantile (0..1), interpolated inside its bucket; 0 if empty.
    double Quantile(double q) const;
    Snapshot Minus(const Snapshot& earlier) const;
  };

  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  Snapshot Read() const;

 private:
  mutable absl::Mutex mu_;
  Snapshot data_ ABSL_GUARDED_BY(mu_);
};

enum class LookupResult { kHit = 0, kMiss = 1, kFailed = 2 };

class Telemetry {
 public:
  // `env`'s clock dates the stats' baseline (ResetStats).
  explicit Telemetry(Env* env = Env::Default());

  void CountLookup(Namespace ns, LookupResult result);
  void CountPublish(Namespace ns, bool already_cached, uint64_t bytes);
  void CountFailureRecorded() { ++failures_recorded_; }
  // A hit served from this host's local tier (true) or the shared store.
  void CountHitTier(bool local) { ++(local ? hits_local_ : hits_shared_); }
  // A Lock call's answer (LockResponse::Outcome name, lowercase, or
  // "unavailable") and how long it took.
  void CountLock(const std::string& outcome, absl::Duration waited);

  // Adds this object's counters to `stats` (which holds the lock table's,
  // the index's and the stores' numbers) and fills the derived fields.
  void Fill(v1::Stats* stats) const;

  // `cumulative` minus the baseline of the last Reset().
  v1::Stats SinceReset(const v1::Stats& cumulative) const;
  // Makes `cumulative` the new baseline.
  void Reset(const v1::Stats& cumulative);

  // The Prometheus exposition of `cumulative` (from Fill) and the
  // labelled counters and histograms.
  std::string RenderPrometheus(const v1::Stats& cumulative) const;

 private:
  static constexpr int kNamespaces = 2;
  Env* const env_;
  std::array<std::array<std::atomic<uint64_t>, 3>, kNamespaces> lookups_{};
  std::array<std::atomic<uint64_t>, kNamespaces> publishes_{};
  std::array<std::atomic<uint64_t>, kNamespaces> already_cached_{};
  std::array<std::atomic<uint64_t>, kNamespaces> publish_bytes_{};
  std::atomic<uint64_t> failures_recorded_{0};
  std::atomic<uint64_t> lock_ready_{0};
  std::atomic<uint64_t> hits_local_{0};
  std::atomic<uint64_t> hits_shared_{0};

  mutable absl::Mutex mu_;
  std::vector<std::pair<std::string, uint64_t>> lock_outcomes_
      ABSL_GUARDED_BY(mu_);
  Histogram lock_wait_;
  v1::Stats baseline_ ABSL_GUARDED_BY(mu_);
  Histogram::Snapshot wait_baseline_ ABSL_GUARDED_BY(mu_);
  int64_t baseline_time_ms_ ABSL_GUARDED_BY(mu_);
};

// Writes `content` to `path` atomically: a temp file beside it, fsync,
// rename. The file is created 0644.
absl::Status WriteTextfile(const std::string& path, const std::string& content);

}  // namespace neffd

#endif  // NEFFD_DAEMON_TELEMETRY_TELEMETRY_H_
