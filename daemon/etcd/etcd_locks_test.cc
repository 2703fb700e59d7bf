// EtcdLocks of two "hosts" in one process, on one store directory and one
// real etcd (Debian's etcd-server on loopback): one holder per key, a
// waiter woken by the release it watches, the fence a holder's lease file
// keeps when etcd goes away, and the lease files of dead etcd holders and of
// filesystem-protocol holders.
#include "daemon/etcd/etcd_locks.h"

#include <filesystem>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "daemon/locks/file_locks.h"
#include "gtest/gtest.h"
#include "store/layout.h"
#include "store/lock_paths.h"
#include "tests/harness/etcd_server.h"
#include "tests/harness/process.h"
#include "tests/harness/temp_dir.h"

namespace neffd::etcd {
namespace {

namespace fs = std::filesystem;

// One host: its etcd client, its two file locks and its etcd locks.
struct Host {
  std::unique_ptr<EtcdClient> client;
  std::unique_ptr<ExternalLocks> fenced;
  std::unique_ptr<ExternalLocks> files;
  std::unique_ptr<EtcdLocks> locks;
};

class EtcdLocksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir("etcd_locks_");
    absl::StatusOr<std::unique_ptr<test_support::EtcdServer>> started =
        test_support::EtcdServer::Start(root_ + "/etcd");
    ASSERT_TRUE(started.ok()) << started.status();
    etcd_ = *std::move(started);
    a_ = MakeHost("hostA");
    b_ = MakeHost("hostB");
  }

  FileLocksOptions Files(const std::string& host) const {
    FileLocksOptions o;
    o.locks_dir = absl::StrCat(root_, "/", host, "/locks");
    o.host_id = host;
    o.entry_dir = [this](const EntryKey& id) { return EntryDir(id); };
    o.quarantine_dir = [this](const EntryKey&) {
      return root_ + "/store/quarantine";
    };
    return o;
  }

  Host MakeHost(const std::string& name) {
    Host host;
    EtcdOptions options;
    options.endpoints = etcd_->endpoint();
    options.call_timeout = absl::Seconds(2);
    host.client = *EtcdClient::Connect(options);
    FileLocksOptions fenced = Files(name);
    fenced.etcd_fenced = true;
    host.fenced = NewFileLocks(fenced);
    host.files = NewFileLocks(Files(name));
    EtcdLocksOptions o;
    o.client = host.client.get();
    o.host_id = name;
    o.fenced = host.fenced.get();
    o.fallback = host.files.get();
    o.retry_interval = absl::Milliseconds(200);
    absl::StatusOr<std::unique_ptr<EtcdLocks>> locks = EtcdLocks::Start(o);
    EXPECT_TRUE(locks.ok()) << locks.status();
    host.locks = *std::move(locks);
    // Waits are watched once the watch is up.
    EXPECT_TRUE(test_support::WaitUntil(
        [&] { return host.locks->state().watching; }, absl::Seconds(30)));
    return host;
  }

  std::string EntryDir(const EntryKey& id) const {
    return absl::StrCat(root_, "/store/", RecordsRelDir(id.key()));
  }
  std::string LeasePath() const {
    return absl::StrCat(EntryDir(id_), "/", kLeaseFileName);
  }
  std::string LeaseFile() const {
    std::ifstream in(LeasePath());
    return std::string(std::istreambuf_iterator<char>(in), {});
  }

  std::string root_;
  std::unique_ptr<test_support::EtcdServer> etcd_;
  Host a_, b_;
  EntryKey id_ = *EntryKey::Parse("neff", "2.19", "cafe01");
};

TEST_F(EtcdLocksTest, AWaiterIsWokenByTheReleaseItWatchesAndThenTakesTheKey) {
  std::unique_ptr<ExternalLock> held = a_.locks->TryTake(id_, "lease-a");
  ASSERT_NE(held, nullptr);
  // The holder's lease file is on the store, marked as an etcd holder's.
  EXPECT_NE(LeaseFile().find(" etcd:lease-a "), std::string::npos)
      << LeaseFile();
  absl::StatusOr<std::vector<EtcdHolder>> holders = b_.locks->Holders();
  ASSERT_TRUE(holders.ok()) << holders.status();
  ASSERT_EQ(holders->size(), 1u);
  EXPECT_EQ((*holders)[0].canonical, id_.Canonical());
  EXPECT_EQ((*holders)[0].host, "hostA");

  absl::Notification woken;
  bool watching = false;
  EXPECT_EQ(b_.locks->TryTakeOrWatch(
                id_, "lease-b", [&] { woken.Notify(); }, &watching),
            nullptr);
  EXPECT_TRUE(watching);  // no polling: the release will wake it
  EXPECT_FALSE(woken.HasBeenNotified());

  held.reset();
  EXPECT_TRUE(woken.WaitForNotificationWithTimeout(absl::Seconds(30)));
  std::unique_ptr<ExternalLock> taken = b_.locks->TryTake(id_, "lease-b");
  ASSERT_NE(taken, nullptr);
  EXPECT_NE(LeaseFile().find("hostB"), std::string::npos);
  EXPECT_EQ(b_.locks->state().watch_wakeups, 1u);
  EXPECT_EQ(b_.locks->state().etcd_takes, 1u);
  EXPECT_TRUE(a_.locks->state().etcd_healthy);
}

TEST_F(EtcdLocksTest, ADeadEtcdHoldersLeaseFileIsBrokenAtOnce) {
  // hostC held the key through etcd and died: its etcd key went with its
  // lease, its marked lease file stayed.
  fs::create_directories(EntryDir(id_));
  std::ofstream(LeasePath()) << "hostC 4242 etcd:lease-c 1700000000000\n";
  std::unique_ptr<ExternalLock> taken = a_.locks->TryTake(id_, "lease-a");
  ASSERT_NE(taken, nullptr);
  EXPECT_NE(LeaseFile().find("hostA"), std::string::npos);
}

TEST_F(EtcdLocksTest, AFilesystemProtocolHoldersLeaseFileIsRespected) {
  // hostC holds the key on the filesystem protocol (its etcd failing).
  std::unique_ptr<ExternalLocks> c = NewFileLocks(Files("hostC"));
  std::unique_ptr<ExternalLock> held_by_c = c->TryTake(id_, "lease-c");
  ASSERT_NE(held_by_c, nullptr);
  bool watching = true;
  EXPECT_EQ(a_.locks->TryTakeOrWatch(
                id_, "lease-a", [] {}, &watching),
            nullptr);
  EXPECT_FALSE(watching);  // polled, as that protocol's holders are
  // The etcd key it took on the way was given back.
  absl::StatusOr<std::vector<EtcdHolder>> holders = b_.locks->Holders();
  ASSERT_TRUE(holders.ok()) << holders.status();
  EXPECT_TRUE(holders->empty());
}

TEST_F(EtcdLocksTest,
       WithEtcdGoneTakesFallBackAndAnEtcdHoldersFileStillFences) {
  std::unique_ptr<ExternalLock> held = a_.locks->TryTake(id_, "lease-a");
  ASSERT_NE(held, nullptr);
  etcd_->Kill();
  // hostB cannot ask etcd: it falls back to the lease files, where hostA's
  // fresh file keeps it out.
  bool watching = true;
  EXPECT_EQ(b_.locks->TryTakeOrWatch(
                id_, "lease-b", [] {}, &watching),
            nullptr);
  EXPECT_FALSE(watching);
  CoordinatorState state = b_.locks->state();
  EXPECT_FALSE(state.etcd_healthy);
  EXPECT_EQ(state.fallbacks, 1u);
  EXPECT_EQ(state.fallback_takes, 1u);
  EXPECT_FALSE(state.last_error.empty());
  // Another key is taken on the files meanwhile: nothing fails.
  const EntryKey other = *EntryKey::Parse("neff", "2.19", "cafe02");
  EXPECT_NE(b_.locks->TryTake(other, "lease-b2"), nullptr);
  EXPECT_TRUE(held->StillHeld());

  // etcd back: the next take after the retry interval goes through it.
  ASSERT_TRUE(etcd_->Restart().ok());
  held.reset();  // hostA's release reaches etcd (or is retried)
  EXPECT_TRUE(test_support::WaitUntil(
      [&] {
        return b_.locks->TryTake(id_, "lease-b") != nullptr &&
               b_.locks->state().etcd_healthy;
      },
      absl::Seconds(30)));
  EXPECT_EQ(b_.locks->state().recoveries, 1u);
}

TEST_F(EtcdLocksTest, AReleaseWhileEtcdIsDownReachesItWhenItIsBack) {
  std::unique_ptr<ExternalLock> held = a_.locks->TryTake(id_, "lease-a");
  ASSERT_NE(held, nullptr);
  etcd_->Kill();
  ASSERT_TRUE(test_support::WaitUntil(
      [&] { return !a_.locks->state().etcd_healthy; }, absl::Seconds(30)));
  // Released while etcd cannot hear it: the lease file goes now, the etcd
  // key is kept for the lease thread. etcd keeps hostA's lease across its
  // restart and hostA keeps it alive, so only that delivered release can
  // remove the key.
  held.reset();
  EXPECT_FALSE(fs::exists(LeasePath()));
  ASSERT_TRUE(etcd_->Restart().ok());
  EXPECT_TRUE(test_support::WaitUntil(
      [&] {
        absl::StatusOr<std::vector<EtcdHolder>> holders = b_.locks->Holders();
        return holders.ok() && holders->empty();
      },
      absl::Seconds(30)));
  EXPECT_TRUE(a_.locks->state().etcd_healthy);
}

TEST_F(EtcdLocksTest, BadOptionsAreRefused) {
  EtcdLocksOptions o;
  EXPECT_TRUE(absl::IsInvalidArgument(EtcdLocks::Start(o).status()));
  o.client = a_.client.get();
  o.fenced = a_.fenced.get();
  o.fallback = a_.files.get();
  o.lease_ttl = absl::ZeroDuration();
  EXPECT_TRUE(absl::IsInvalidArgument(EtcdLocks::Start(o).status()));
}

}  // namespace
}  // namespace neffd::etcd
