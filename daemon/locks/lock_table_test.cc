#include "daemon/locks/lock_table.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "daemon/locks/file_locks.h"
#include "gtest/gtest.h"
#include "store/testing/manual_clock_env.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

class FakeLiveness : public Liveness {
 public:
  std::optional<uint64_t> Observe(const HolderInfo& h) override {
    return h.pid;
  }
  bool IsAlive(const HolderInfo& h, uint64_t) override {
    return !dead.contains(h.pid);
  }
  absl::flat_hash_set<int64_t> dead;
};

class LockTableTest : public ::testing::Test {
 protected:
  LockTableTest() {
    locks_dir_ = test_support::TestTempDir("locks_");
    FileLocksOptions files;
    files.locks_dir = locks_dir_;
    files.shared = false;
    file_locks_ = NewFileLocks(files);
    LockTableOptions options;
    options.lease_ttl = absl::Seconds(30);
    options.poll_interval = absl::Seconds(1);
    options.env = &clock_;
    options.liveness = &liveness_;
    options.external_locks = file_locks_.get();
    table_ = std::make_unique<LockTable>(options);
  }

  // Acquires and records the event the callback got (if it ran).
  LockTable::WaiterId Acquire(int64_t pid, std::optional<LockEvent>* out,
                              bool wait = true,
                              absl::Duration timeout = absl::Seconds(100)) {
    return table_->Acquire(id_, HolderInfo{"h", pid, 0}, wait,
                           clock_.Now() + timeout,
                           [out](LockEvent e) { *out = std::move(e); });
  }

  std::string locks_dir_;
  ManualClockEnv clock_{absl::FromUnixSeconds(1000)};
  FakeLiveness liveness_;
  std::unique_ptr<ExternalLocks> file_locks_;
  std::unique_ptr<LockTable> table_;
  EntryKey id_ = *EntryKey::Parse("neff", "2.0", "k1");
};

TEST_F(LockTableTest, OneHolderAtATimeAndBusyWithoutWait) {
  std::optional<LockEvent> a, b;
  EXPECT_EQ(Acquire(1, &a), 0u);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->outcome, LockOutcome::kGranted);
  EXPECT_EQ(a->lease_id.size(), 32u);
  Acquire(2, &b, /*wait=*/false);
  ASSERT_TRUE(b.has_value());
  EXPECT_EQ(b->outcome, LockOutcome::kBusy);
  EXPECT_EQ(table_->counts().leases_held, 1u);
}

TEST_F(LockTableTest, PublishAnswersEveryWaiterReady) {
  std::optional<LockEvent> holder, w1, w2;
  Acquire(1, &holder);
  EXPECT_EQ(table_->Waiting(holder->lease_id), 0u);
  EXPECT_NE(Acquire(2, &w1), 0u);
  EXPECT_NE(Acquire(3, &w2), 0u);
  EXPECT_FALSE(w1.has_value());
  EXPECT_EQ(table_->counts().waiters, 2u);
  EXPECT_EQ(table_->Waiting(holder->lease_id), 2u);
  EXPECT_EQ(table_->Waiting("no such lease"), 0u);
  ASSERT_TRUE(table_->BeginPublish(holder->lease_id, id_).ok());
  v1::Entry entry;
  entry.set_path("/cache/model.neff");
  table_->FinishPublish(holder->lease_id, &entry);
  for (auto* w : {&w1, &w2}) {
    ASSERT_TRUE(w->has_value());
    EXPECT_EQ((*w)->outcome, LockOutcome::kReady);
    EXPECT_EQ((*w)->entry.path(), "/cache/model.neff");
  }
  EXPECT_EQ(table_->counts().leases_held, 0u);
  EXPECT_EQ(table_->counts().waiters, 0u);
  // The published lease is gone.
  EXPECT_EQ(table_->KeepAlive(holder->lease_id).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(LockTableTest, AbandonHandsTheLockToTheNextWaiterInOrder) {
  std::optional<LockEvent> holder, w1, w2;
  Acquire(1, &holder);
  Acquire(2, &w1);
  Acquire(3, &w2);
  ASSERT_TRUE(table_->Release(holder->lease_id, id_, nullptr).ok());
  ASSERT_TRUE(w1.has_value());
  EXPECT_EQ(w1->outcome, LockOutcome::kGranted);
  EXPECT_FALSE(w2.has_value());
  ASSERT_TRUE(table_->Release(w1->lease_id, id_, nullptr).ok());
  ASSERT_TRUE(w2.has_value());
  EXPECT_EQ(w2->outcome, LockOutcome::kGranted);
}

TEST_F(LockTableTest, RecordedFailureReachesEveryWaiter) {
  std::optional<LockEvent> holder, w1;
  Acquire(1, &holder);
  Acquire(2, &w1);
  v1::Failure failure;
  failure.set_log("error: unsupported op");
  ASSERT_TRUE(table_->Release(holder->lease_id, id_, &failure).ok());
  ASSERT_TRUE(w1.has_value());
  EXPECT_EQ(w1->outcome, LockOutcome::kFailed);
  EXPECT_EQ(w1->failure.log(), "error: unsupported op");
}

TEST_F(LockTableTest, SilentHolderLosesTheLeaseAfterTtlNotBefore) {
  std::optional<LockEvent> holder, w1;
  Acquire(1, &holder);
  Acquire(2, &w1);
  clock_.Advance(absl::Seconds(20));
  ASSERT_TRUE(table_->KeepAlive(holder->lease_id).ok());
  clock_.Advance(
      absl::Seconds(29));  // 49 s after grant, 29 s after the heartbeat
  table_->Tick();
  EXPECT_FALSE(w1.has_value());
  clock_.Advance(absl::Seconds(1));
  table_->Tick();
  ASSERT_TRUE(w1.has_value());
  EXPECT_EQ(w1->outcome, LockOutcome::kGranted);
  EXPECT_EQ(table_->counts().revoked, 1u);
  EXPECT_FALSE(table_->BeginPublish(holder->lease_id, id_).ok());
}

TEST_F(LockTableTest, DeadHolderIsReplacedAtTheNextTick) {
  std::optional<LockEvent> holder, w1;
  Acquire(1, &holder);
  Acquire(2, &w1);
  table_->Tick();
  EXPECT_FALSE(w1.has_value());
  liveness_.dead.insert(1);
  table_->Tick();
  ASSERT_TRUE(w1.has_value());
  EXPECT_EQ(w1->outcome, LockOutcome::kGranted);
}

TEST_F(LockTableTest, HolderGoneHandsTheKeyOnAtOnceUnlessPublishing) {
  std::optional<LockEvent> holder, w1, w2;
  Acquire(1, &holder);
  Acquire(2, &w1);
  Acquire(3, &w2);
  table_->HolderGone(holder->lease_id);  // no tick, no TTL
  ASSERT_TRUE(w1.has_value());
  EXPECT_EQ(w1->outcome, LockOutcome::kGranted);
  EXPECT_EQ(table_->counts().revoked, 1u);
  table_->HolderGone(holder->lease_id);  // already gone: nothing
  EXPECT_FALSE(w2.has_value());
  ASSERT_TRUE(table_->BeginPublish(w1->lease_id, id_).ok());
  table_->HolderGone(w1->lease_id);  // the publish decides
  EXPECT_FALSE(w2.has_value());
  table_->FinishPublish(w1->lease_id, nullptr);
  table_->HolderGone(w1->lease_id);
  ASSERT_TRUE(w2.has_value());
  EXPECT_EQ(w2->outcome, LockOutcome::kGranted);
}

TEST_F(LockTableTest, PublishingLeaseIsNeverRevoked) {
  std::optional<LockEvent> holder;
  Acquire(1, &holder);
  ASSERT_TRUE(table_->BeginPublish(holder->lease_id, id_).ok());
  clock_.Advance(absl::Hours(1));
  liveness_.dead.insert(1);
  table_->Tick();
  EXPECT_EQ(table_->counts().leases_held, 1u);
  table_->FinishPublish(holder->lease_id, nullptr);  // publish failed
  EXPECT_TRUE(table_->KeepAlive(holder->lease_id).ok());
}

TEST_F(LockTableTest, WaitersTimeOutAndCancelledWaitersAreNeverCalled) {
  std::optional<LockEvent> holder, w1, w2;
  Acquire(1, &holder);
  Acquire(2, &w1, true, absl::Seconds(5));
  LockTable::WaiterId w2_id = Acquire(3, &w2, true, absl::Seconds(50));
  EXPECT_TRUE(table_->Cancel(w2_id));
  EXPECT_FALSE(table_->Cancel(w2_id));
  clock_.Advance(absl::Seconds(5));
  table_->Tick();
  ASSERT_TRUE(w1.has_value());
  EXPECT_EQ(w1->outcome, LockOutcome::kTimedOut);
  ASSERT_TRUE(table_->Release(holder->lease_id, id_, nullptr).ok());
  EXPECT_FALSE(w2.has_value());
}

TEST_F(LockTableTest, WrongKeyOrUnknownLeaseIsRefused) {
  std::optional<LockEvent> holder;
  Acquire(1, &holder);
  EntryKey other = *EntryKey::Parse("neff", "2.0", "k2");
  absl::Status s = table_->BeginPublish(holder->lease_id, other);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(absl::StrContains(s.message(), "neff/2.0/k1"));
  EXPECT_EQ(table_->Release("nope", id_, nullptr).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST_F(LockTableTest, LockFileExcludesAProcessWithoutTheDaemon) {
  std::optional<LockEvent> holder, w1;
  Acquire(1, &holder);
  // TorchNeuron's lock file: {locks}/{key}.lock.
  const std::string path = locks_dir_ + "/k1.lock";
  int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  EXPECT_NE(flock(fd, LOCK_EX | LOCK_NB), 0);  // the daemon holds it
  ASSERT_TRUE(table_->Release(holder->lease_id, id_, nullptr).ok());
  ASSERT_EQ(flock(fd, LOCK_EX | LOCK_NB), 0);  // now a fallback client does
  Acquire(2, &w1);
  EXPECT_FALSE(w1.has_value());  // parked until the file is released
  table_->Tick();
  EXPECT_FALSE(w1.has_value());
  close(fd);
  table_->Tick();
  EXPECT_FALSE(w1.has_value());  // polled once per poll_interval
  clock_.Advance(absl::Seconds(1));
  table_->Tick();
  ASSERT_TRUE(w1.has_value());
  EXPECT_EQ(w1->outcome, LockOutcome::kGranted);
}

TEST_F(LockTableTest, ShutdownAnswersWaitersAndRefusesNewOnes) {
  std::optional<LockEvent> holder, w1, late;
  Acquire(1, &holder);
  Acquire(2, &w1);
  table_->Shutdown();
  ASSERT_TRUE(w1.has_value());
  EXPECT_EQ(w1->outcome, LockOutcome::kShutdown);
  Acquire(3, &late);
  EXPECT_EQ(late->outcome, LockOutcome::kShutdown);
}

TEST_F(LockTableTest, WaitersBeyondTheCapAreRefusedAtOnce) {
  LockTableOptions options;
  options.env = &clock_;
  options.max_waiters = 2;
  table_ = std::make_unique<LockTable>(options);
  std::optional<LockEvent> holder, w1, w2, w3, free_key, no_wait;
  Acquire(1, &holder);
  Acquire(2, &w1);
  Acquire(3, &w2);
  EXPECT_FALSE(w1.has_value());
  EXPECT_FALSE(w2.has_value());
  Acquire(4, &w3);
  ASSERT_TRUE(w3.has_value());
  EXPECT_EQ(w3->outcome, LockOutcome::kOverloaded);
  EXPECT_EQ(table_->counts().waiters, 2u);
  // The cap is on parking only: a free key is granted, wait=false is busy.
  table_->Acquire(*EntryKey::Parse("neff", "2.0", "k2"), HolderInfo{"h", 5, 0},
                  true, clock_.Now() + absl::Seconds(1),
                  [&free_key](LockEvent e) { free_key = std::move(e); });
  ASSERT_TRUE(free_key.has_value());
  EXPECT_EQ(free_key->outcome, LockOutcome::kGranted);
  Acquire(6, &no_wait, /*wait=*/false);
  EXPECT_EQ(no_wait->outcome, LockOutcome::kBusy);
  // A slot frees up once a waiter is answered.
  ASSERT_TRUE(table_->Release(holder->lease_id, id_, nullptr).ok());
  ASSERT_TRUE(w1.has_value());
  EXPECT_EQ(w1->outcome, LockOutcome::kGranted);
  w3.reset();
  Acquire(4, &w3);
  EXPECT_FALSE(w3.has_value());
  EXPECT_EQ(table_->counts().waiters, 2u);
}

// External locks that watch the hold elsewhere (as etcd's do): the table's
// side of TryTakeOrWatch.
class WatchingLocks : public ExternalLocks {
 public:
  std::unique_ptr<ExternalLock> TryTake(const EntryKey&,
                                        const std::string&) override {
    return nullptr;
  }
  std::unique_ptr<ExternalLock> TryTakeOrWatch(const EntryKey&,
                                               const std::string&,
                                               std::function<void()> wake,
                                               bool* watching) override {
    absl::MutexLock lock(&mu);
    ++takes;
    *watching = true;
    if (!held_elsewhere) return std::make_unique<ExternalLock>();
    this->wake = std::move(wake);
    return nullptr;
  }
  absl::Mutex mu;
  bool held_elsewhere = true;
  int takes = 0;
  std::function<void()> wake;
};

TEST(LockTableWatchTest, AWatchedKeyIsNotPolledAndIsTakenWhenWoken) {
  ManualClockEnv clock{absl::FromUnixSeconds(1000)};
  WatchingLocks external;
  std::atomic<int> probes{0};
  LockTableOptions options;
  options.poll_interval = absl::Seconds(1);
  options.env = &clock;
  options.external_locks = &external;
  options.probe_entry = [&](const EntryKey&) -> std::optional<v1::Entry> {
    ++probes;
    return std::nullopt;
  };
  LockTable table(options);
  const EntryKey id = *EntryKey::Parse("neff", "2.0", "k1");
  absl::Notification granted;
  table.Acquire(id, HolderInfo{"h", 1, 0}, true,
                clock.Now() + absl::Minutes(10), [&](LockEvent e) {
                  if (e.outcome == LockOutcome::kGranted) granted.Notify();
                });
  for (int i = 0; i < 20; ++i) {  // 20 poll intervals
    clock.Advance(absl::Milliseconds(500));
    table.Tick();
  }
  EXPECT_EQ(probes.load(), 0);
  {
    absl::MutexLock lock(&external.mu);
    EXPECT_EQ(external.takes, 1);
    external.held_elsewhere = false;
  }
  std::function<void()> wake;
  {
    absl::MutexLock lock(&external.mu);
    wake = external.wake;
  }
  ASSERT_TRUE(wake != nullptr);
  wake();  // the holder elsewhere released: look, then take, now
  EXPECT_TRUE(granted.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(probes.load(), 1);
  absl::MutexLock lock(&external.mu);
  EXPECT_EQ(external.takes, 2);
}

}  // namespace
}  // namespace neffd
