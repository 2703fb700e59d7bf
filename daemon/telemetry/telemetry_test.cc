// Telemetry in process: what Fill, SinceReset and RenderPrometheus report
// after counted calls, with the counting period dated by a manual clock.
#include "daemon/telemetry/telemetry.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/testing/manual_clock_env.h"

namespace neffd {
namespace {

class TelemetryTest : public ::testing::Test {
 protected:
  v1::Stats Filled() const {
    v1::Stats stats;
    telemetry_.Fill(&stats);
    return stats;
  }

  ManualClockEnv clock_{absl::FromUnixSeconds(1'800'000'000)};
  Telemetry telemetry_{&clock_};
};

TEST_F(TelemetryTest, FillSumsTheNamespacesAndDerivesCompilesSaved) {
  telemetry_.CountLookup(Namespace::kNeff, LookupResult::kHit);
  telemetry_.CountLookup(Namespace::kHlo, LookupResult::kHit);
  telemetry_.CountLookup(Namespace::kNeff, LookupResult::kMiss);
  telemetry_.CountLookup(Namespace::kNeff, LookupResult::kFailed);
  telemetry_.CountPublish(Namespace::kNeff, /*already_cached=*/false, 1000);
  telemetry_.CountPublish(Namespace::kHlo, /*already_cached=*/true, 500);
  telemetry_.CountLock("ready", absl::Milliseconds(3));
  telemetry_.CountLock("granted", absl::Seconds(2));
  telemetry_.CountHitTier(/*local=*/true);
  telemetry_.CountHitTier(/*local=*/false);

  const v1::Stats s = Filled();
  EXPECT_EQ(s.lookups(), 4u);
  EXPECT_EQ(s.hits(), 2u);
  EXPECT_EQ(s.misses(), 1u);
  EXPECT_EQ(s.failed_lookups(), 1u);
  EXPECT_EQ(s.publishes(), 1u);
  EXPECT_EQ(s.already_cached(), 1u);
  EXPECT_EQ(s.publish_bytes(), 1000u) << "an already-cached publish adds none";
  EXPECT_EQ(s.compiles_saved(), 3u) << "two hits and one READY lock";
  EXPECT_EQ(s.hits_local(), 1u);
  EXPECT_EQ(s.hits_shared(), 1u);
  EXPECT_EQ(s.counting_since_unix_ms(), int64_t{1'800'000'000'000});
}

TEST_F(TelemetryTest, ResetStartsANewPeriodAtTheEnvsClock) {
  telemetry_.CountLookup(Namespace::kNeff, LookupResult::kHit);
  v1::Stats cumulative = Filled();
  cumulative.set_leases_held(7);  // a gauge: never a difference
  clock_.Advance(absl::Minutes(5));
  telemetry_.Reset(cumulative);

  telemetry_.CountLookup(Namespace::kNeff, LookupResult::kMiss);
  telemetry_.CountLookup(Namespace::kNeff, LookupResult::kMiss);
  v1::Stats now = Filled();
  now.set_leases_held(7);
  const v1::Stats since = telemetry_.SinceReset(now);
  EXPECT_EQ(since.lookups(), 2u);
  EXPECT_EQ(since.hits(), 0u);
  EXPECT_EQ(since.misses(), 2u);
  EXPECT_EQ(since.leases_held(), 7u);
  EXPECT_EQ(since.counting_since_unix_ms(),
            int64_t{1'800'000'000'000} + 5 * 60 * 1000);
}

TEST_F(TelemetryTest, PrometheusExpositionHasEachFamilyOnceWithItsSamples) {
  telemetry_.CountLookup(Namespace::kHlo, LookupResult::kMiss);
  telemetry_.CountLock("timed_out", absl::Seconds(20));
  v1::Stats s = Filled();
  s.set_quarantined(3);
  const std::string text = telemetry_.RenderPrometheus(s);
  EXPECT_TRUE(absl::StrContains(
      text, "neffd_lookups_total{namespace=\"hlo\",result=\"miss\"} 1\n"))
      << text;
  EXPECT_TRUE(absl::StrContains(text, "neffd_quarantined_total 3\n")) << text;
  EXPECT_TRUE(absl::StrContains(
      text, "neffd_lock_requests_total{outcome=\"timed_out\"} 1\n"))
      << text;
  // 20 s falls in the 60 s bucket and every bucket above it.
  EXPECT_TRUE(
      absl::StrContains(text, "neffd_lock_wait_seconds_bucket{le=\"10\"} 0\n"))
      << text;
  EXPECT_TRUE(
      absl::StrContains(text, "neffd_lock_wait_seconds_bucket{le=\"60\"} 1\n"))
      << text;
  for (const char* family :
       {"neffd_lookups_total", "neffd_lock_wait_seconds", "neffd_hits_total"}) {
    const std::string type = absl::StrCat("# TYPE ", family, " ");
    const size_t first = text.find(type);
    ASSERT_NE(first, std::string::npos) << family;
    EXPECT_EQ(text.find(type, first + 1), std::string::npos)
        << family << " declared twice";
  }
  // The S3 series only when the tier is on.
  EXPECT_FALSE(absl::StrContains(text, "neffd_remote_uploads_total"));
  s.set_remote("s3://bucket/prefix");
  EXPECT_TRUE(absl::StrContains(telemetry_.RenderPrometheus(s),
                                "neffd_remote_uploads_total 0\n"));
  // The etcd series only with --coordinator=etcd://; 0 while on the files.
  EXPECT_FALSE(absl::StrContains(text, "neffd_etcd_healthy"));
  s.set_coordinator("etcd");
  s.set_etcd_fallbacks(2);
  const std::string etcd = telemetry_.RenderPrometheus(s);
  EXPECT_TRUE(absl::StrContains(etcd, "neffd_etcd_healthy 0\n")) << etcd;
  EXPECT_TRUE(absl::StrContains(etcd, "neffd_etcd_fallbacks_total 2\n"))
      << etcd;
}

}  // namespace
}  // namespace neffd
