// Scheduler with real threads and the real clock: tasks run at their
// periods, a slow task on its own thread does not hold up the others, and
// Stop waits for what runs and is prompt otherwise.
#include "daemon/runtime/scheduler.h"

#include <atomic>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"

namespace neffd {
namespace {

constexpr absl::Duration kResolution = absl::Milliseconds(5);

// Blocks until `counter` reaches `at_least` (or a generous deadline).
bool ReachesSoon(const std::atomic<int>& counter, int at_least) {
  const absl::Time deadline = absl::Now() + absl::Seconds(20);
  while (counter.load() < at_least) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(kResolution);
  }
  return true;
}

TEST(SchedulerTest, FirstRunIsAtStartOnlyWhenAsked) {
  std::atomic<int> eager{0}, fast{0}, hourly{0};
  Scheduler scheduler(kResolution);
  scheduler.Add({absl::Hours(1), [&] { ++eager; }, false,
                 /*first_at_start=*/true});
  scheduler.Add({absl::Hours(1), [&] { ++hourly; }});
  scheduler.Add({kResolution, [&] { ++fast; }});
  scheduler.Start();
  ASSERT_TRUE(ReachesSoon(eager, 1));
  ASSERT_TRUE(ReachesSoon(fast, 20));
  scheduler.Stop();
  EXPECT_EQ(eager.load(), 1);
  EXPECT_EQ(hourly.load(), 0);
}

TEST(SchedulerTest, ASlowTaskOnItsOwnThreadDoesNotDelayTheClock) {
  std::atomic<int> ticks{0}, slow_runs{0};
  absl::Notification release;
  std::atomic<bool> slow_finished{false};
  Scheduler scheduler(kResolution);
  scheduler.Add({kResolution, [&] { ++ticks; }});
  scheduler.Add({kResolution,
                 [&] {
                   if (++slow_runs == 1) {
                     release.WaitForNotification();
                     slow_finished = true;
                   }
                 },
                 /*own_thread=*/true});
  scheduler.Start();
  ASSERT_TRUE(ReachesSoon(slow_runs, 1));
  const int ticks_while_blocked = ticks.load();
  // The clock keeps ticking while the slow task is stuck in its first run.
  ASSERT_TRUE(ReachesSoon(ticks, ticks_while_blocked + 20));
  EXPECT_EQ(slow_runs.load(), 1);  // never run twice at once
  release.Notify();
  // Due again meanwhile: it runs again once the first run is over.
  ASSERT_TRUE(ReachesSoon(slow_runs, 2));
  EXPECT_TRUE(slow_finished.load());
  scheduler.Stop();
}

TEST(SchedulerTest, StopWaitsForARunningTaskAndIsPromptOtherwise) {
  std::atomic<int> started{0};
  std::atomic<bool> finished{false};
  absl::Notification release;
  Scheduler scheduler(kResolution);
  scheduler.Add({kResolution,
                 [&] {
                   ++started;
                   release.WaitForNotification();
                   finished = true;
                 },
                 /*own_thread=*/true});
  scheduler.Add({absl::Hours(1), [] {}, /*own_thread=*/true});
  scheduler.Start();
  ASSERT_TRUE(ReachesSoon(started, 1));
  absl::Notification stopped;
  std::thread stopper([&] {
    scheduler.Stop();
    stopped.Notify();
  });
  EXPECT_FALSE(stopped.WaitForNotificationWithTimeout(absl::Milliseconds(50)));
  const absl::Time released = absl::Now();
  release.Notify();
  stopped.WaitForNotification();
  stopper.join();
  EXPECT_TRUE(finished.load());
  EXPECT_EQ(started.load(), 1);
  // An idle own-thread task and the clock thread stop at once.
  EXPECT_LT(absl::Now() - released, absl::Seconds(1));
}

}  // namespace
}  // namespace neffd
