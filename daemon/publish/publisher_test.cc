// Publisher over the real parts it joins: a Store on disk, a RocksDB Index,
// a LockTable and a LocalTier. What a lease holder and the ranks waiting on
// it see: who gets the entry, from where, when the lease ends, and what
// happens to the staged file.
#include "daemon/publish/publisher.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "daemon/index/index.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

// Issue 30: this host's waiters are answered once the bytes are verified
// and in the tier, before the shared store's copy is durable. The store's
// Env holds a call on the artifact's temp file (`held`) until the waiter
// has its answer (the wrong order would never get past it).
class HoldsAnArtifactCall : public EnvWrapper {
 public:
  explicit HoldsAnArtifactCall(FsOp held)
      : EnvWrapper(Env::Default()), held_(held) {}
  absl::Notification answered;
  std::atomic<bool> answered_first{false};

 protected:
  absl::Status BeforeCall(const FsCall& call) override {
    if (call.op == held_ && absl::StrContains(call.path, ".neff.tmp.")) {
      answered_first =
          answered.WaitForNotificationWithTimeout(absl::Seconds(20));
    }
    return absl::OkStatus();
  }

 private:
  const FsOp held_;
};

class PublisherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir("publisher_");
    staging_ = root_ + "/staging";
    std::filesystem::create_directories(staging_);
    StoreOptions store;
    store.host_id = "this-host";
    store.root = root_ + "/neff";
    neff_ = *Store::Open(store);
    store.root = root_ + "/hlo";
    store.ns = Namespace::kHlo;
    hlo_ = *Store::Open(store);
    index_ = *Index::Open(root_ + "/index");
    catalog_ = std::make_unique<Catalog>(neff_.get(), hlo_.get(), index_.get());
    locks_ = std::make_unique<LockTable>(LockTableOptions{});
    LocalTierOptions tier;
    tier.dir = root_ + "/tier";
    tier_ = *LocalTier::Open(tier);
    PublisherOptions options;
    options.host_id = "this-host";
    publisher_ = std::make_unique<Publisher>(options, catalog_.get(),
                                             locks_.get(), tier_.get());
  }

  // A lock call's deadline: far enough that no call here reaches it.
  static absl::Time Soon() { return absl::Now() + absl::Seconds(30); }

  // Replaces the neff store, and the catalog and publisher over it, with
  // one whose Env holds `held` on the artifact's temp file until answered.
  HoldsAnArtifactCall& HoldStoreCall(FsOp held) {
    publisher_.reset();
    held_env_ = std::make_unique<HoldsAnArtifactCall>(held);
    StoreOptions store;
    store.host_id = "this-host";
    store.root = root_ + "/slow-neff";
    store.env = held_env_.get();
    neff_ = *Store::Open(store);
    catalog_ = std::make_unique<Catalog>(neff_.get(), hlo_.get(), index_.get());
    PublisherOptions options;
    options.host_id = "this-host";
    publisher_ = std::make_unique<Publisher>(options, catalog_.get(),
                                             locks_.get(), tier_.get());
    return *held_env_;
  }

  // A lease on `id` for rank 0 of pid `pid`.
  std::string Lease(const EntryKey& id, int64_t pid = 100) {
    std::optional<LockEvent> event;
    locks_->Acquire(id, HolderInfo{"this-host", pid, 0}, /*wait=*/false, Soon(),
                    [&event](LockEvent e) { event = std::move(e); });
    EXPECT_TRUE(event.has_value() && event->outcome == LockOutcome::kGranted);
    return event.has_value() ? event->lease_id : "";
  }

  // What a parked waiter was answered, and whether the lease was still out
  // at that moment.
  struct Answer {
    absl::Mutex mu;
    std::optional<LockEvent> event ABSL_GUARDED_BY(mu);
    bool lease_still_out ABSL_GUARDED_BY(mu) = false;
  };
  void Park(const EntryKey& id, Answer* answer) {
    locks_->Acquire(id, HolderInfo{"this-host", 200, 1}, /*wait=*/true, Soon(),
                    [this, id, answer](LockEvent e) {
                      absl::MutexLock lock(&answer->mu);
                      answer->lease_still_out = locks_->Held(id);
                      answer->event = std::move(e);
                    });
  }

  std::string Stage(const std::string& name, const std::string& bytes) {
    const std::string path = staging_ + "/" + name;
    std::ofstream(path) << bytes;
    return path;
  }

  Artifact Staged(const std::string& lease, const std::string& path,
                  const std::string& bytes) {
    Artifact artifact;
    artifact.lease_id = lease;
    artifact.staged_path = path;
    artifact.size = bytes.size();
    artifact.sha256 = Sha256Hex(bytes);
    artifact.metadata = {{"compiler", "neuronx-cc"}};
    return artifact;
  }

  static Artifact Inline(const std::string& lease, const std::string& bytes) {
    Artifact artifact;
    artifact.lease_id = lease;
    artifact.inline_bytes = bytes;
    artifact.size = bytes.size();
    artifact.sha256 = Sha256Hex(bytes);
    return artifact;
  }

  bool Cached(const EntryKey& id) {
    absl::StatusOr<std::optional<v1::Entry>> found = catalog_->Find(id);
    return found.ok() && found->has_value();
  }

  std::string root_, staging_;
  const EntryKey neff_id_ = *EntryKey::Parse("neff", "2.19", "graph1");
  const EntryKey hlo_id_ = *EntryKey::Parse("hlo", "2.19", "module1");
  std::unique_ptr<HoldsAnArtifactCall> held_env_;  // outlives the store
  std::unique_ptr<Store> neff_, hlo_;
  std::unique_ptr<Index> index_;
  std::unique_ptr<Catalog> catalog_;
  std::unique_ptr<LockTable> locks_;
  std::unique_ptr<LocalTier> tier_;
  std::unique_ptr<Publisher> publisher_;
};

TEST_F(PublisherTest, WaitersGetTheLocalCopyWhileTheLeaseIsStillPinned) {
  const std::string bytes(64 << 10, 'n');
  const std::string lease = Lease(neff_id_);
  Answer waiter;
  Park(neff_id_, &waiter);
  const std::string staged = Stage("s1", bytes);

  absl::StatusOr<Published> published =
      publisher_->Publish(neff_id_, Staged(lease, staged, bytes));
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_FALSE(published->already_cached);
  EXPECT_TRUE(absl::StartsWith(published->entry.path(), root_ + "/tier/"))
      << published->entry.path();
  EXPECT_EQ(published->entry.metadata().at("compiler"), "neuronx-cc");

  absl::MutexLock lock(&waiter.mu);
  ASSERT_TRUE(waiter.event.has_value());
  EXPECT_EQ(waiter.event->outcome, LockOutcome::kReady);
  EXPECT_EQ(waiter.event->entry.path(), published->entry.path());
  // Answered from the verified copy before the publish ended, not by the
  // lease's end.
  EXPECT_TRUE(waiter.lease_still_out);
  EXPECT_FALSE(locks_->Held(neff_id_));
  EXPECT_TRUE(Cached(neff_id_));
  EXPECT_FALSE(std::filesystem::exists(staged));  // adopted by the tier
}

TEST_F(PublisherTest, WaitersAreAnsweredBeforeTheSharedStoreIsWritten) {
  // Small: held before the store's copy is even written.
  HoldsAnArtifactCall& env = HoldStoreCall(FsOp::kWrite);
  const std::string bytes(128 << 10, 's');
  const std::string lease = Lease(neff_id_);
  locks_->Acquire(neff_id_, HolderInfo{"this-host", 200, 1}, /*wait=*/true,
                  Soon(), [&env](LockEvent e) {
                    EXPECT_EQ(e.outcome, LockOutcome::kReady);
                    env.answered.Notify();
                  });
  absl::StatusOr<Published> published =
      publisher_->Publish(neff_id_, Staged(lease, Stage("s1", bytes), bytes));
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_TRUE(env.answered_first);
  EXPECT_TRUE(env.answered.HasBeenNotified());
  absl::StatusOr<StoredEntry> stored = neff_->Find(neff_id_);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->entry.sha256(), Sha256Hex(bytes));
}

std::string Varied(size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i * 31 + 7);
  return bytes;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Issue 30: a large NEFF is read once, writing the tier's copy and the
// store's at the same time; the waiters are answered before the store's
// copy is durable (the store's Env holds the artifact's fsync until the
// waiter has its answer), and the request may leave the digest to the
// daemon.
TEST_F(PublisherTest, ALargeNeffIsAnsweredBeforeTheStoreIsDurable) {
  HoldsAnArtifactCall& env = HoldStoreCall(FsOp::kSync);
  const std::string bytes = Varied((3 << 20) + 5);
  const std::string lease = Lease(neff_id_);
  std::string answered_path;
  locks_->Acquire(neff_id_, HolderInfo{"this-host", 200, 1}, /*wait=*/true,
                  Soon(), [&env, &answered_path](LockEvent e) {
                    EXPECT_EQ(e.outcome, LockOutcome::kReady);
                    answered_path = e.entry.path();
                    env.answered.Notify();
                  });
  Artifact artifact = Staged(lease, Stage("big", bytes), bytes);
  artifact.sha256.clear();  // the daemon's digest names the entry
  absl::StatusOr<Published> published = publisher_->Publish(neff_id_, artifact);
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_TRUE(env.answered_first);
  EXPECT_EQ(published->entry.sha256(), Sha256Hex(bytes));
  EXPECT_EQ(answered_path, published->entry.path());
  EXPECT_TRUE(absl::StartsWith(answered_path, root_ + "/tier/"));
  EXPECT_TRUE(ReadFile(answered_path) == bytes);
  absl::StatusOr<StoredEntry> stored = neff_->Find(neff_id_);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->entry.sha256(), Sha256Hex(bytes));
  EXPECT_TRUE(ReadFile(stored->entry.path()) == bytes);
  EXPECT_FALSE(std::filesystem::exists(artifact.staged_path));
}

TEST_F(PublisherTest, ALargeNeffThatIsNotItsDigestLeavesNothing) {
  const std::string bytes = Varied((2 << 20) + 1);
  const std::string lease = Lease(neff_id_);
  Answer waiter;
  Park(neff_id_, &waiter);
  Artifact wrong = Staged(lease, Stage("big", bytes), bytes);
  wrong.sha256 = Sha256Hex("something else");
  absl::StatusOr<Published> refused = publisher_->Publish(neff_id_, wrong);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StartsWith(refused.status().message(), "sha256:"))
      << refused.status();
  EXPECT_FALSE(std::filesystem::exists(wrong.staged_path));
  EXPECT_FALSE(Cached(neff_id_));
  EXPECT_TRUE(locks_->Held(neff_id_));
  EXPECT_EQ(tier_->used_bytes(), 0u);
  absl::MutexLock lock(&waiter.mu);
  EXPECT_FALSE(waiter.event.has_value());
}

TEST_F(PublisherTest, ASmallNeffMayLeaveItsDigestToTheDaemon) {
  const std::string bytes = Varied(64 << 10);
  Artifact artifact = Staged(Lease(neff_id_), Stage("s1", bytes), bytes);
  artifact.sha256.clear();
  absl::StatusOr<Published> published = publisher_->Publish(neff_id_, artifact);
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_EQ(published->entry.sha256(), Sha256Hex(bytes));
  EXPECT_TRUE(absl::StrContains(published->entry.path(), Sha256Hex(bytes)));
  absl::StatusOr<StoredEntry> stored = neff_->Find(neff_id_);
  ASSERT_TRUE(stored.ok()) << stored.status();
  EXPECT_EQ(stored->entry.sha256(), Sha256Hex(bytes));
}

TEST_F(PublisherTest, WithoutTheLeaseNothingIsReadOrRemoved) {
  const std::string bytes = "artifact";
  const std::string staged = Stage("s1", bytes);
  absl::StatusOr<Published> published =
      publisher_->Publish(neff_id_, Staged("no-such-lease", staged, bytes));
  EXPECT_TRUE(absl::IsFailedPrecondition(published.status()))
      << published.status();
  EXPECT_TRUE(std::filesystem::exists(staged));
  EXPECT_FALSE(Cached(neff_id_));
}

TEST_F(PublisherTest, WrongBytesKeepTheLeaseForARetry) {
  const std::string bytes(4096, 'a');
  const std::string lease = Lease(neff_id_);
  Answer waiter;
  Park(neff_id_, &waiter);
  Artifact wrong = Staged(lease, Stage("s1", bytes), bytes);
  wrong.sha256 = Sha256Hex("something else");
  absl::StatusOr<Published> refused = publisher_->Publish(neff_id_, wrong);
  EXPECT_TRUE(absl::IsInvalidArgument(refused.status())) << refused.status();
  EXPECT_TRUE(absl::StartsWith(refused.status().message(), "sha256:"));
  EXPECT_FALSE(std::filesystem::exists(wrong.staged_path));  // ours to remove
  EXPECT_TRUE(locks_->Held(neff_id_));
  {
    absl::MutexLock lock(&waiter.mu);
    EXPECT_FALSE(waiter.event.has_value());
  }

  absl::StatusOr<Published> retried =
      publisher_->Publish(neff_id_, Staged(lease, Stage("s2", bytes), bytes));
  ASSERT_TRUE(retried.ok()) << retried.status();
  absl::MutexLock lock(&waiter.mu);
  ASSERT_TRUE(waiter.event.has_value());
  EXPECT_EQ(waiter.event->outcome, LockOutcome::kReady);
}

TEST_F(PublisherTest, StagedFilesThatAreNotTheCallersOwnAreRefused) {
  const std::string bytes = "secret";
  const std::string lease = Lease(neff_id_);
  const std::string target = Stage("target", bytes);
  const std::string link = staging_ + "/link";
  ASSERT_EQ(symlink(target.c_str(), link.c_str()), 0);
  absl::StatusOr<Published> via_symlink =
      publisher_->Publish(neff_id_, Staged(lease, link, bytes));
  EXPECT_TRUE(absl::IsFailedPrecondition(via_symlink.status()));
  EXPECT_TRUE(absl::StrContains(via_symlink.status().message(),
                                "staged_path: " + link + " is a symlink"))
      << via_symlink.status();

  const std::string hard = staging_ + "/hard";
  ASSERT_EQ(::link(target.c_str(), hard.c_str()), 0);
  absl::StatusOr<Published> via_hard_link =
      publisher_->Publish(neff_id_, Staged(lease, hard, bytes));
  EXPECT_TRUE(absl::IsFailedPrecondition(via_hard_link.status()));
  EXPECT_TRUE(
      absl::StrContains(via_hard_link.status().message(), "2 hard links"))
      << via_hard_link.status();

  Artifact short_file = Staged(lease, Stage("short", bytes), bytes);
  short_file.size = bytes.size() + 1;
  absl::StatusOr<Published> wrong_size =
      publisher_->Publish(neff_id_, short_file);
  EXPECT_TRUE(absl::IsInvalidArgument(wrong_size.status()));
  EXPECT_TRUE(absl::StartsWith(wrong_size.status().message(), "size:"));

  EXPECT_TRUE(std::filesystem::exists(target));
  EXPECT_FALSE(Cached(neff_id_));
  EXPECT_TRUE(locks_->Held(neff_id_));  // the holder may still publish
}

TEST_F(PublisherTest, InlineBytesPublishOnceThenAreAlreadyCached) {
  const std::string bytes = "hlo module";
  for (bool already_cached : {false, true}) {
    absl::StatusOr<Published> published =
        publisher_->Publish(hlo_id_, Inline(Lease(hlo_id_), bytes));
    ASSERT_TRUE(published.ok()) << published.status();
    EXPECT_EQ(published->already_cached, already_cached);
    // hlo entries are not copied to the tier.
    EXPECT_TRUE(absl::StartsWith(published->entry.path(), root_ + "/hlo/"));
    EXPECT_FALSE(locks_->Held(hlo_id_));
  }
}

TEST_F(PublisherTest, AFailureGoesToEveryWaiterAndEndsTheLease) {
  EXPECT_TRUE(absl::IsFailedPrecondition(
      publisher_->RecordFailure(neff_id_, "no-such-lease", "log").status()));
  EXPECT_FALSE(neff_->FindFailure(neff_id_).has_value());

  const std::string lease = Lease(neff_id_);
  Answer waiter;
  Park(neff_id_, &waiter);
  absl::StatusOr<RecordedFailure> recorded =
      publisher_->RecordFailure(neff_id_, lease, "error: out of memory");
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  EXPECT_TRUE(recorded->released.ok()) << recorded->released;
  EXPECT_TRUE(neff_->FindFailure(neff_id_).has_value());
  EXPECT_FALSE(locks_->Held(neff_id_));
  absl::MutexLock lock(&waiter.mu);
  ASSERT_TRUE(waiter.event.has_value());
  EXPECT_EQ(waiter.event->outcome, LockOutcome::kFailed);
}

// What a PublishIntent saw: whether the store had the entry's artifact or
// model.done when Begin came (it must not: Begin is the record made before
// the entry can exist), and how the publish ended.
class RecordingIntent : public PublishIntent {
 public:
  explicit RecordingIntent(const Store* store) : store_(store) {}
  void Begin(const EntryKey& id, uint64_t size,
             const std::string& sha256) override {
    struct stat st;
    began = true;
    artifact_at_begin = stat(store_->ArtifactPath(id).c_str(), &st) == 0 ||
                        stat(store_->PathsOf(id).done().c_str(), &st) == 0;
    size_at_begin = size;
  }
  void End(bool stored) override { ended.push_back(stored); }

  const Store* const store_;
  bool began = false;
  bool artifact_at_begin = false;
  uint64_t size_at_begin = 0;
  std::vector<bool> ended;
};

TEST_F(PublisherTest, IntentHearsOfTheEntryBeforeTheStoreAndHowItEnded) {
  const std::string bytes = "neff bytes";
  const std::string lease = Lease(neff_id_);
  // Refused before the store: a staged file of another size.
  RecordingIntent bad_file(neff_.get());
  Artifact wrong_size = Staged(lease, Stage("short", "neff"), bytes);
  EXPECT_FALSE(publisher_->Publish(neff_id_, wrong_size, &bad_file).ok());
  EXPECT_FALSE(bad_file.began);
  EXPECT_EQ(bad_file.ended, std::vector<bool>{false});
  // Refused by the store: the bytes do not hash to the claimed sha256.
  RecordingIntent bad_hash(neff_.get());
  Artifact wrong_hash = Staged(lease, Stage("a", bytes), bytes);
  wrong_hash.sha256 = Sha256Hex("other bytes");
  EXPECT_FALSE(publisher_->Publish(neff_id_, wrong_hash, &bad_hash).ok());
  EXPECT_FALSE(bad_hash.began);
  EXPECT_EQ(bad_hash.ended, std::vector<bool>{false});
  // Stored: Begin came before anything of the entry was on the store.
  RecordingIntent stored(neff_.get());
  ASSERT_TRUE(
      publisher_
          ->Publish(neff_id_, Staged(lease, Stage("b", bytes), bytes), &stored)
          .ok());
  EXPECT_TRUE(stored.began);
  EXPECT_FALSE(stored.artifact_at_begin);
  EXPECT_EQ(stored.size_at_begin, bytes.size());
  EXPECT_EQ(stored.ended, std::vector<bool>{true});
  // Already cached (inline, under a new lease): not a new entry.
  RecordingIntent cached(neff_.get());
  absl::StatusOr<Published> published =
      publisher_->Publish(neff_id_, Inline(Lease(neff_id_), bytes), &cached);
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_TRUE(published->already_cached);
  EXPECT_FALSE(cached.began);
  EXPECT_EQ(cached.ended, std::vector<bool>{false});
  // Inline bytes that verify: Begin before the commit, like a staged file.
  const EntryKey other = *EntryKey::Parse("neff", "2.19", "graph2");
  RecordingIntent inline_stored(neff_.get());
  ASSERT_TRUE(
      publisher_->Publish(other, Inline(Lease(other), bytes), &inline_stored)
          .ok());
  EXPECT_TRUE(inline_stored.began);
  EXPECT_FALSE(inline_stored.artifact_at_begin);
  EXPECT_EQ(inline_stored.ended, std::vector<bool>{true});
}

}  // namespace
}  // namespace neffd
