// Issue 27, item 6: TorchNeuronCache (client/torchneuron_cache.h), the
// adapter with the shape of TorchNeuron's persistent cache and compile lock,
// against a real neffd on a real socket and directories, and beside
// unmodified TorchNeuron ranks (tests/torchneuron_rank.py, processes that
// link nothing of neffd's):
//   - put / get / exists / remove / clear by key, in TorchNeuron's layout;
//   - an entry that only neffd has (published by a GetOrCompile client);
//   - a lock wait that runs out is DeadlineExceeded naming the key;
//   - the lock excludes unmodified ranks and this process's other threads,
//     and a Put under it wakes them to a hit; the same with the daemon down
//     (the filesystem fallback).
// Many processes at once: tests/torchneuron_adapter_test.cc.
#include "client/torchneuron_cache.h"

#include <filesystem>
#include <memory>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"
#include "tests/torchneuron_host.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

constexpr char kVersion[] = "2.19.8089.0";
constexpr char kKeyA[] = "0123456789abcdef0123456789abcdef";
constexpr char kKeyB[] = "fedcba9876543210fedcba9876543210";

class TorchNeuronCacheTest : public TorchNeuronHost<::testing::Test> {
 protected:
  CacheClientOptions Options(const std::string& address) const {
    CacheClientOptions o;
    o.address = address;
    o.neff_cache_dir = daemon_->neff_dir();
    o.hlo_cache_dir = root_ + "/hlo";
    o.local_dir = daemon_->local_dir();
    o.debug_dir = root_ + "/debug";
    o.warn = [](const std::string&) {};
    return o;
  }

  // An adapter on the daemon, or (`address` of no daemon) on the
  // filesystem alone.
  std::unique_ptr<TorchNeuronCache> Adapter(std::string address = "") {
    if (address.empty()) address = daemon_->address();
    return std::make_unique<TorchNeuronCache>(
        std::make_unique<CacheClient>(Options(address)), kVersion);
  }

  // An unmodified rank that writes "rank's <key>" when it compiles.
  std::unique_ptr<Process> Rank(const std::string& key,
                                const std::string& hold_until = "") {
    return UnmodifiedRank(key, hold_until, "rank's " + key);
  }

  // Puts `neff` under the lock while an unmodified rank waits for it; the
  // rank wakes to a hit, reading the adapter's bytes.
  void ExpectWaitingRankReadsThePut(TorchNeuronCache& cache,
                                    const std::string& key) {
    absl::StatusOr<std::unique_ptr<TorchNeuronCompileLock>> lock =
        cache.AcquireLock(key, absl::Seconds(30));
    ASSERT_TRUE(lock.ok()) << lock.status();
    ASSERT_TRUE((*lock)->held());
    std::unique_ptr<Process> rank = Rank(key);
    ASSERT_TRUE(Said(*rank, "WAITING")) << rank->Stderr();
    EXPECT_FALSE(absl::StrContains(rank->Stdout(), "LOCKED"));
    ASSERT_TRUE(cache.Put(key, "adapter's neff").ok());
    (*lock)->Release();
    EXPECT_EQ(rank->Wait(), 0) << rank->Stderr();
    EXPECT_EQ(Events(*rank), "WAITING\nLOCKED\nHIT\nRELEASED\n");
    EXPECT_EQ(ReadFile(cache.EntryPath(key)), "adapter's neff");
  }
};

TEST_F(TorchNeuronCacheTest, PutGetExistsRemoveInTorchNeuronsLayout) {
  std::unique_ptr<TorchNeuronCache> cache = Adapter();
  EXPECT_EQ(*cache->Exists(kKeyA), false);
  EXPECT_TRUE(absl::IsNotFound(cache->Get(kKeyA).status()));

  ASSERT_TRUE(cache->Put(kKeyA, "neff bytes").ok());
  EXPECT_EQ(*cache->Exists(kKeyA), true);
  EXPECT_EQ(*cache->Get(kKeyA), "neff bytes");
  EXPECT_EQ(cache->EntryPath(kKeyA),
            daemon_->neff_dir() + "/01/23/" + kKeyA + ".neff");
  EXPECT_EQ(ReadFile(cache->EntryPath(kKeyA)), "neff bytes");
  // neffd has it too: a plain client of the daemon hits.
  CacheClient plain(Options(daemon_->address()));
  absl::StatusOr<std::optional<CacheResult>> hit =
      plain.Lookup("neff", kVersion, kKeyA);
  ASSERT_TRUE(hit.ok() && hit->has_value()) << hit.status();
  EXPECT_FALSE((*hit)->fallback);
  // An unmodified rank hits without locking.
  std::unique_ptr<Process> rank = Rank(kKeyA);
  EXPECT_EQ(rank->Wait(), 0) << rank->Stderr();
  EXPECT_EQ(Events(*rank), "HIT\n");

  ASSERT_TRUE(cache->Remove(kKeyA).ok());
  EXPECT_FALSE(fs::exists(cache->EntryPath(kKeyA)));
  // The daemon drops it once it checks it against the store again.
  EXPECT_TRUE(WaitUntil([&] { return !*cache->Exists(kKeyA); }));
  EXPECT_TRUE(absl::IsNotFound(cache->Get(kKeyA).status()));
  EXPECT_TRUE(cache->Remove(kKeyA).ok());  // nothing there: still OK
}

TEST_F(TorchNeuronCacheTest, ClearRemovesEveryNeffAndTheShardDirectories) {
  std::unique_ptr<TorchNeuronCache> cache = Adapter();
  ASSERT_TRUE(cache->Put(kKeyA, "a").ok());
  ASSERT_TRUE(cache->Put(kKeyB, "b").ok());
  // One more written by an unmodified rank, beside the daemon's entries.
  const std::string kKeyC = "00112233445566778899aabbccddeeff";
  std::unique_ptr<Process> rank = Rank(kKeyC);
  ASSERT_EQ(rank->Wait(), 0) << rank->Stderr();
  ASSERT_TRUE(*cache->Exists(kKeyC));

  ASSERT_TRUE(cache->Clear().ok());
  for (const char* key : {kKeyA, kKeyB, kKeyC.c_str()}) {
    EXPECT_FALSE(fs::exists(cache->EntryPath(key))) << key;
    EXPECT_TRUE(WaitUntil([&] { return !*cache->Exists(key); })) << key;
  }
  EXPECT_FALSE(fs::exists(daemon_->neff_dir() + "/01"));
  EXPECT_FALSE(fs::exists(daemon_->neff_dir() + "/fe"));
  EXPECT_FALSE(fs::exists(daemon_->neff_dir() + "/00"));
  // The cache works on after a clear.
  ASSERT_TRUE(cache->Put(kKeyA, "again").ok());
  EXPECT_EQ(*cache->Get(kKeyA), "again");
}

TEST_F(TorchNeuronCacheTest, GetReadsAnEntryOnlyTheDaemonHas) {
  CacheClient plain(Options(daemon_->address()));
  absl::StatusOr<CacheResult> compiled =
      plain.GetOrCompile("neff", kVersion, kKeyB, [](const CompileJob& job) {
        WriteFile(job.output_path, "compiled by a client");
        return CompileResult::Ok();
      });
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  std::unique_ptr<TorchNeuronCache> cache = Adapter();
  EXPECT_TRUE(*cache->Exists(kKeyB));
  EXPECT_EQ(*cache->Get(kKeyB), "compiled by a client");
  // The lock of a cached entry holds nothing: the caller's Get hits.
  absl::StatusOr<std::unique_ptr<TorchNeuronCompileLock>> lock =
      cache->AcquireLock(kKeyB, absl::Seconds(5));
  ASSERT_TRUE(lock.ok()) << lock.status();
  EXPECT_FALSE((*lock)->held());
}

TEST_F(TorchNeuronCacheTest, ALockTimeoutIsAClearError) {
  const std::string release = root_ + "/release";
  std::unique_ptr<Process> rank = Rank(kKeyA, release);
  ASSERT_TRUE(Said(*rank, "LOCKED")) << rank->Stderr();
  std::unique_ptr<TorchNeuronCache> cache = Adapter();
  absl::StatusOr<std::unique_ptr<TorchNeuronCompileLock>> lock =
      cache->AcquireLock(kKeyA, absl::Seconds(1));
  ASSERT_TRUE(absl::IsDeadlineExceeded(lock.status())) << lock.status();
  EXPECT_TRUE(absl::StrContains(lock.status().message(), "lock timeout"));
  EXPECT_TRUE(absl::StrContains(lock.status().message(), kKeyA));
  EXPECT_FALSE(fs::exists(cache->EntryPath(kKeyA)));
  // The rank finishes its compile; the adapter then hits.
  WriteFile(release, "");
  EXPECT_EQ(rank->Wait(), 0) << rank->Stderr();
  EXPECT_EQ(*cache->Get(kKeyA), std::string("rank's ") + kKeyA);
}

TEST_F(TorchNeuronCacheTest, BadKeysAndEmptyNeffsAreInvalidArguments) {
  std::unique_ptr<TorchNeuronCache> cache = Adapter();
  for (const char* key : {"", "0123", "0123456789ABCDEF0123456789ABCDEF",
                          "../23456789abcdef0123456789abcdef"}) {
    EXPECT_TRUE(absl::IsInvalidArgument(cache->Exists(key).status())) << key;
    EXPECT_TRUE(absl::IsInvalidArgument(cache->Put(key, "x"))) << key;
    EXPECT_TRUE(absl::IsInvalidArgument(cache->AcquireLock(key).status()));
  }
  EXPECT_TRUE(absl::IsInvalidArgument(cache->Put(kKeyA, "")));
}

TEST_F(TorchNeuronCacheTest, AWaitingUnmodifiedRankWakesToTheAdaptersPut) {
  std::unique_ptr<TorchNeuronCache> cache = Adapter();
  ExpectWaitingRankReadsThePut(*cache, kKeyA);
}

TEST_F(TorchNeuronCacheTest, ThreadsOfOneProcessWaitForEachOther) {
  std::unique_ptr<TorchNeuronCache> cache = Adapter();
  absl::StatusOr<std::unique_ptr<TorchNeuronCompileLock>> first =
      cache->AcquireLock(kKeyA, absl::Seconds(30));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<TorchNeuronCompileLock>> second;
  std::thread waiter(
      [&] { second = cache->AcquireLock(kKeyA, absl::Seconds(30)); });
  // The second thread's request is parked in the daemon.
  EXPECT_TRUE(
      WaitUntil([&] { return LockWaiters(*daemon_) == 1; }, absl::Seconds(30)));
  ASSERT_TRUE(cache->Put(kKeyA, "first thread's").ok());
  (*first)->Release();
  waiter.join();
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_FALSE((*second)->held());  // the entry was there: nothing to hold
  EXPECT_EQ(*cache->Get(kKeyA), "first thread's");
}

TEST_F(TorchNeuronCacheTest, WithoutTheDaemonTheFilesystemServesTheSameWay) {
  // Nothing listens there: every call falls back to the directories.
  std::unique_ptr<TorchNeuronCache> cache =
      Adapter("unix:" + root_ + "/no-daemon.sock");
  ExpectWaitingRankReadsThePut(*cache, kKeyB);
  EXPECT_EQ(*cache->Get(kKeyB), "adapter's neff");
  EXPECT_GE(cache->client().counters().fallbacks, 1u);
  // Published into the store as well: the daemon serves it.
  CacheClient plain(Options(daemon_->address()));
  absl::StatusOr<std::optional<CacheResult>> hit =
      plain.Lookup("neff", kVersion, kKeyB);
  ASSERT_TRUE(hit.ok() && hit->has_value()) << hit.status();
  // A rank holding the flock makes the fallback's lock wait run out.
  const std::string release = root_ + "/release";
  std::unique_ptr<Process> rank = Rank(kKeyA, release);
  ASSERT_TRUE(Said(*rank, "LOCKED")) << rank->Stderr();
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      cache->AcquireLock(kKeyA, absl::Seconds(1)).status()));
  WriteFile(release, "");
  EXPECT_EQ(rank->Wait(), 0) << rank->Stderr();
}

}  // namespace
}  // namespace neffd::test_support
