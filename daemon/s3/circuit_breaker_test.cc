#include "daemon/s3/circuit_breaker.h"

#include "daemon/s3/remote_error.h"
#include "gtest/gtest.h"
#include "store/testing/manual_clock_env.h"

namespace neffd::remote {
namespace {

class CircuitBreakerTest : public ::testing::Test {
 protected:
  CircuitBreakerOptions Options() {
    CircuitBreakerOptions options;
    options.failure_threshold = 3;
    options.initial_backoff = absl::Seconds(10);
    options.max_backoff = absl::Seconds(25);
    options.env = &clock_;
    return options;
  }

  // Allowed calls that all fail with `cause`.
  void FailCalls(CircuitBreaker& breaker, int n,
                 RemoteErrorCause cause = RemoteErrorCause::kTimeout) {
    for (int i = 0; i < n; ++i) {
      ASSERT_TRUE(breaker.Allow()) << "call " << i;
      breaker.Record(RemoteError(cause, "down"));
    }
  }

  ManualClockEnv clock_{absl::FromUnixSeconds(1000)};
};

TEST_F(CircuitBreakerTest, OpensAfterThresholdConsecutiveFailures) {
  CircuitBreaker breaker(Options());
  FailCalls(breaker, 2);
  breaker.Record(absl::OkStatus());  // a success resets the count
  FailCalls(breaker, 2);
  EXPECT_EQ(breaker.stats().state, BreakerState::kClosed);

  FailCalls(breaker, 1);

  EXPECT_EQ(breaker.stats().state, BreakerState::kOpen);
  EXPECT_FALSE(breaker.Allow());
  EXPECT_FALSE(breaker.Allow());
  CircuitBreakerStats stats = breaker.stats();
  EXPECT_EQ(stats.calls_skipped, 2u);
  EXPECT_EQ(stats.times_opened, 1u);
  EXPECT_EQ(stats.consecutive_failures, 3);
  EXPECT_EQ(stats.open_until, clock_.Now() + absl::Seconds(10));
}

TEST_F(CircuitBreakerTest, NotFoundIsNotAFailure) {
  CircuitBreaker breaker(Options());
  FailCalls(breaker, 10, RemoteErrorCause::kNotFound);
  EXPECT_EQ(breaker.stats().state, BreakerState::kClosed);
  EXPECT_EQ(breaker.stats().consecutive_failures, 0);
}

TEST_F(CircuitBreakerTest, OneProbeAfterBackoffWhichClosesOnSuccess) {
  CircuitBreaker breaker(Options());
  FailCalls(breaker, 3);
  clock_.Advance(absl::Seconds(9));
  EXPECT_FALSE(breaker.Allow());

  clock_.Advance(absl::Seconds(1));
  EXPECT_TRUE(breaker.Allow()) << "the probe";
  EXPECT_EQ(breaker.stats().state, BreakerState::kHalfOpen);
  EXPECT_FALSE(breaker.Allow()) << "only one probe at a time";
  breaker.Record(absl::OkStatus());

  EXPECT_EQ(breaker.stats().state, BreakerState::kClosed);
  EXPECT_TRUE(breaker.Allow());
}

TEST_F(CircuitBreakerTest, FailedProbesBackOffExponentiallyUpToTheCap) {
  CircuitBreaker breaker(Options());
  FailCalls(breaker, 3);
  std::vector<absl::Duration> backoffs;
  for (int probe = 0; probe < 3; ++probe) {
    clock_.Set(breaker.stats().open_until);
    FailCalls(breaker, 1);  // the probe fails
    backoffs.push_back(breaker.stats().open_until - clock_.Now());
  }
  EXPECT_EQ(backoffs,
            (std::vector<absl::Duration>{absl::Seconds(20), absl::Seconds(25),
                                         absl::Seconds(25)}));
  EXPECT_EQ(breaker.stats().times_opened, 4u);

  // A successful probe resets the backoff.
  clock_.Set(breaker.stats().open_until);
  ASSERT_TRUE(breaker.Allow());
  breaker.Record(absl::OkStatus());
  FailCalls(breaker, 3);
  EXPECT_EQ(breaker.stats().open_until - clock_.Now(), absl::Seconds(10));
}

}  // namespace
}  // namespace neffd::remote
