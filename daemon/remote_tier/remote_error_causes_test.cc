// Every cause the S3 client fails with is counted in Stats under its own
// name, so a cause added to daemon/s3/remote_error.h without a Stats
// field (proto/remote_error_causes.h) fails here instead of never showing in
// `neffctl stats` or the metrics.
#include "proto/remote_error_causes.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/s3/remote_error.h"
#include "gtest/gtest.h"
#include "proto/stat_fields.h"

namespace neffd {
namespace {

using remote::RemoteErrorCause;

TEST(RemoteErrorCausesTest, EveryFailureCauseHasAStatsFieldOfItsName) {
  size_t counted = 0;
  for (int i = 0; i < remote::kRemoteErrorCauseCount; ++i) {
    const auto cause = static_cast<RemoteErrorCause>(i);
    const absl::string_view name = remote::RemoteErrorCauseName(cause);
    const RemoteErrorCauseField* field = FindRemoteErrorCause(name);
    if (cause == RemoteErrorCause::kNotFound) {
      EXPECT_EQ(field, nullptr) << "not_found is an answer, not an error";
      continue;
    }
    ASSERT_NE(field, nullptr) << name;
    ++counted;
  }
  EXPECT_EQ(counted, std::size(kRemoteErrorCauses));
}

TEST(RemoteErrorCausesTest, EachFieldIsItsOwnAndTheTotalAddsThemUp) {
  v1::Stats stats;
  uint64_t value = 1;
  for (const RemoteErrorCauseField& cause : kRemoteErrorCauses) {
    (stats.*cause.set)(value);
    value *= 10;
  }
  EXPECT_EQ(stats.remote_errors_access_denied(), 1u);
  EXPECT_EQ(stats.remote_errors_throttled(), 10u);
  EXPECT_EQ(stats.remote_errors_timeout(), 100u);
  EXPECT_EQ(stats.remote_errors_connection_refused(), 1000u);
  EXPECT_EQ(stats.remote_errors_server_error(), 10000u);
  EXPECT_EQ(stats.remote_errors_other(), 100000u);
  EXPECT_EQ(RemoteErrorsTotal(stats), 111111u);
}

// `neffctl stats` names a cause by its field's row (neffd.proto).
TEST(RemoteErrorCausesTest, EachFieldsRowInNeffctlStatsIsTheCausesName) {
  for (const RemoteErrorCauseField& cause : kRemoteErrorCauses) {
    const std::string field_name = absl::StrCat("remote_errors_", cause.name);
    const google::protobuf::FieldDescriptor* field =
        v1::Stats::descriptor()->FindFieldByName(field_name);
    ASSERT_NE(field, nullptr) << field_name;
    EXPECT_EQ(StatMetricOf(field).row(), cause.name);
    EXPECT_EQ(StatMetricOf(field).place(), v1::StatMetric::NAMED_NOTE);
  }
}

}  // namespace
}  // namespace neffd
