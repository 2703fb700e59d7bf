// CacheClient without a daemon (fallback mode) on real directories: the
// protocol, working directories, failures, disabled caches, metrics. The
// same client against a real neffd is tested in tests/client_*_test.cc.
#include "client/cache_client.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/file_lock.h"
#include "client/workdir.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/layout.h"
#include "store/lock_paths.h"
#include "store/store.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

// The real Env, its wall clock `skew` ahead (a test moves past a retry-after).
class SkewedClockEnv : public EnvWrapper {
 public:
  explicit SkewedClockEnv(const absl::Duration* skew)
      : EnvWrapper(Env::Default()), skew_(skew) {}
  absl::Time Now() override { return target()->Now() + *skew_; }

 private:
  const absl::Duration* const skew_;
};

class CacheClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir();
    options_.use_daemon = false;
    options_.neff_cache_dir = root_ + "/neff";
    options_.hlo_cache_dir = root_ + "/hlo";
    options_.local_dir = root_ + "/local";
    options_.debug_dir = root_ + "/debug";
    options_.metrics_dir = root_ + "/metrics";
    options_.lock_timeout = absl::Seconds(30);
    options_.env = &skewed_;
    options_.warn = [this](const std::string& m) { warnings_.push_back(m); };
  }

  std::unique_ptr<CacheClient> NewClient() {
    return std::make_unique<CacheClient>(options_);
  }

  // A compile_fn that writes `content` and counts its runs.
  CompileFn Writes(std::string content) {
    return [this, content](const CompileJob& job) {
      ++compiles_;
      last_job_ = job;
      WriteFile(job.output_path, content);
      WriteFile(job.workdir + "/log-neuron-cc.txt", "compiled fine\n");
      return CompileResult::Ok();
    };
  }

  // Where the store keeps `key`'s files (store/layout.h).
  EntryPaths Files(const std::string& key, const std::string& ns = "neff") {
    return EntryPaths{absl::StrCat(root_, "/", ns, "/", ShardDir(key)),
                      absl::StrCat(key, ns == "neff" ? ".neff" : ".hlo"),
                      absl::StrCat(root_, "/", ns, "/", RecordsRelDir(key)),
                      "model.done",
                      "model.log",
                      kKeyInputsFileName,
                      kLeaseFileName};
  }

  std::string root_;
  CacheClientOptions options_;
  absl::Duration skew_ = absl::ZeroDuration();
  SkewedClockEnv skewed_{&skew_};
  std::vector<std::string> warnings_;
  std::atomic<int> compiles_{0};
  CompileJob last_job_;
};

TEST_F(CacheClientTest, CompilesOnceThenHitsInTheDaemonsLayout) {
  auto client = NewClient();
  absl::StatusOr<CacheResult> first =
      client->GetOrCompile("neff", "1.0", "abc123", Writes("NEFF bytes"));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->source, CacheResult::Source::kCompiled);
  EXPECT_TRUE(first->fallback);
  EXPECT_EQ(first->path, Files("abc123").artifact());
  EXPECT_EQ(ReadFile(first->path), "NEFF bytes");
  EXPECT_EQ(first->sha256, Sha256Hex("NEFF bytes"));
  EXPECT_TRUE(Exists(Files("abc123").done()));
  // The compile ran in the spec's hierarchy, removed after the publish.
  EXPECT_EQ(last_job_.workdir, root_ + "/debug/neuronx-cc/abc123");
  EXPECT_EQ(last_job_.output_path, last_job_.workdir + "/module.neff");
  EXPECT_FALSE(Exists(last_job_.workdir));

  absl::StatusOr<CacheResult> second =
      client->GetOrCompile("neff", "1.0", "abc123", Writes("other"));
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(second->source, CacheResult::Source::kHit);
  EXPECT_EQ(second->path, first->path);
  EXPECT_EQ(compiles_, 1);
  absl::StatusOr<std::optional<CacheResult>> looked =
      client->Lookup("neff", "1.0", "abc123");
  ASSERT_TRUE(looked.ok() && looked->has_value());
  EXPECT_EQ((*looked)->path, first->path);
  looked = client->Lookup("neff", "1.0", "nothere");
  ASSERT_TRUE(looked.ok());
  EXPECT_FALSE(looked->has_value());
  const CacheCounters c = client->counters();
  EXPECT_EQ(c.lookups, 4u);
  EXPECT_EQ(c.hits, 2u);
  EXPECT_EQ(c.compiles, 1u);
}

TEST_F(CacheClientTest, BadNamesAreInvalidArgument) {
  auto client = NewClient();
  EXPECT_TRUE(absl::IsInvalidArgument(
      client->GetOrCompile("neff", "1.0", "../x", Writes("x")).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(
      client->GetOrCompile("tmp", "1.0", "k", Writes("x")).status()));
  EXPECT_EQ(compiles_, 0);
}

TEST_F(CacheClientTest, PreservedArtifactsStayAfterPublish) {
  options_.preserve_artifacts = true;
  auto client = NewClient();
  ASSERT_TRUE(client->GetOrCompile("neff", "1.0", "k1", Writes("n")).ok());
  EXPECT_EQ(ReadFile(last_job_.workdir + "/log-neuron-cc.txt"),
            "compiled fine\n");
  EXPECT_EQ(ReadFile(last_job_.output_path), "n");
}

TEST_F(CacheClientTest, CompilerErrorIsRecordedReturnedToLaterCallsAndKept) {
  options_.failed_ttl = absl::Hours(1);
  auto client = NewClient();
  CompileFn fails = [this](const CompileJob& job) {
    ++compiles_;
    WriteFile(job.workdir + "/log-neuron-cc.txt",
              "ERROR: unsupported op foo\n");
    return CompileResult::CompilerError("");  // log from the workdir
  };
  absl::StatusOr<CacheResult> r =
      client->GetOrCompile("neff", "1.0", "bad1", fails);
  ASSERT_TRUE(IsCompileFailure(r.status())) << r.status();
  EXPECT_TRUE(absl::IsAborted(r.status()));
  std::optional<CompileFailure> failure = GetCompileFailure(r.status());
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->log, "ERROR: unsupported op foo\n");
  EXPECT_EQ(failure->workdir, root_ + "/debug/neuronx-cc/bad1");
  EXPECT_TRUE(absl::StrContains(r.status().message(), failure->workdir));
  EXPECT_TRUE(absl::StrContains(r.status().message(), "unsupported op foo"));
  EXPECT_TRUE(Exists(failure->workdir + "/log-neuron-cc.txt"));

  // Not recompiled while the failure is in force; the same failure.
  absl::StatusOr<CacheResult> again =
      client->GetOrCompile("neff", "1.0", "bad1", fails);
  std::optional<CompileFailure> recorded = GetCompileFailure(again.status());
  ASSERT_TRUE(recorded.has_value()) << again.status();
  EXPECT_EQ(recorded->log, failure->log);
  EXPECT_GT(recorded->retry_after, absl::Now() + absl::Minutes(59));
  EXPECT_TRUE(recorded->workdir.empty());
  EXPECT_TRUE(IsCompileFailure(client->Lookup("neff", "1.0", "bad1").status()));
  EXPECT_EQ(compiles_, 1);

  skew_ = absl::Hours(2);  // past retry-after: compiled again
  ASSERT_TRUE(client->GetOrCompile("neff", "1.0", "bad1", Writes("ok")).ok());
  EXPECT_EQ(compiles_, 2);
}

TEST_F(CacheClientTest, CancelledCompileIsNotRecorded) {
  auto client = NewClient();
  absl::StatusOr<CacheResult> r =
      client->GetOrCompile("neff", "1.0", "k2", [](const CompileJob&) {
        return CompileResult::FromWaitStatus(9 /* killed by SIGKILL */, "");
      });
  EXPECT_TRUE(absl::IsCancelled(r.status())) << r.status();
  EXPECT_FALSE(IsCompileFailure(r.status()));
  EXPECT_FALSE(Exists(Files("k2").log()));
  ASSERT_TRUE(client->GetOrCompile("neff", "1.0", "k2", Writes("n")).ok());
  EXPECT_EQ(compiles_, 1);
}

TEST_F(CacheClientTest, WaitStatusMapping) {
  EXPECT_EQ(CompileResult::FromWaitStatus(0, "").kind,
            CompileResult::Kind::kOk);
  EXPECT_EQ(CompileResult::FromWaitStatus(1 << 8, "log").kind,
            CompileResult::Kind::kCompilerError);
  EXPECT_EQ(CompileResult::FromWaitStatus(9, "").kind,
            CompileResult::Kind::kCancelled);
}

TEST_F(CacheClientTest, DisabledCacheAlwaysCompilesAndNeverPublishes) {
  options_.neff_cache_disabled = true;
  auto client = NewClient();
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<CacheResult> r =
        client->GetOrCompile("neff", "1.0", "k3", Writes("fresh"));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(r->source, CacheResult::Source::kUncached);
    EXPECT_EQ(ReadFile(r->path), "fresh");
    EXPECT_EQ(r->sha256, Sha256Hex("fresh"));  // hashed though not published
  }
  EXPECT_EQ(compiles_, 2);
  EXPECT_FALSE(Exists(Files("k3").artifact_dir));
  EXPECT_FALSE(Exists(root_ + "/local/locks"));
  EXPECT_TRUE(warnings_.empty());
}

TEST_F(CacheClientTest, HloEntriesLiveInTheHloCacheUnlessDisabled) {
  auto client = NewClient();
  absl::StatusOr<CacheResult> r =
      client->GetOrCompile("hlo", "1.0", "aten.add.Tensor_f32", Writes("hlo"));
  ASSERT_TRUE(r.ok()) << r.status();
  // TorchNeuron's layout, in the HLO store.
  EXPECT_EQ(r->path, Files("aten.add.Tensor_f32", "hlo").artifact()) << r->path;
  EXPECT_EQ(ReadFile(r->path), "hlo");
  EXPECT_EQ(last_job_.output_path,
            root_ + "/debug/hlo/aten.add.Tensor_f32/module.hlo.pb");

  options_.hlo_cache_enabled = false;
  auto disabled = NewClient();
  absl::StatusOr<std::optional<CacheResult>> looked =
      disabled->Lookup("hlo", "1.0", "aten.add.Tensor_f32");
  ASSERT_TRUE(looked.ok());
  EXPECT_FALSE(looked->has_value());
  r = disabled->GetOrCompile("hlo", "1.0", "aten.add.Tensor_f32", Writes("x"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, CacheResult::Source::kUncached);
}

TEST_F(CacheClientTest, LockTimeoutCompilesHereWithAWarningNeverAnError) {
  options_.lock_timeout = absl::Seconds(1);
  auto client = NewClient();
  absl::StatusOr<EntryKey> id = EntryKey::Parse("neff", "1.0", "k4");
  absl::StatusOr<FileLock> held = LockEntry(
      root_ + "/local/locks", *id, absl::InfinitePast(), Env::Default());
  ASSERT_TRUE(held.ok() && held->held());
  absl::StatusOr<CacheResult> r =
      client->GetOrCompile("neff", "1.0", "k4", Writes("mine"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->source, CacheResult::Source::kUncached);
  EXPECT_EQ(ReadFile(r->path), "mine");
  ASSERT_EQ(warnings_.size(), 1u);
  EXPECT_TRUE(absl::StrContains(warnings_[0], "compiling it here"));
  EXPECT_EQ(client->counters().lock_timeouts, 1u);

  held->Release();  // free now: compiled and published
  r = client->GetOrCompile("neff", "1.0", "k4", Writes("mine"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->source, CacheResult::Source::kCompiled);
}

// Waiters verify a just-published entry after letting the host's lock go;
// one that fails verification is quarantined and compiled once more, never
// served.
TEST_F(CacheClientTest, EntryFoundTornWhileRanksWaitIsRecompiledOnce) {
  absl::StatusOr<EntryKey> id = EntryKey::Parse("neff", "1.0", "k7");
  absl::StatusOr<FileLock> held = LockEntry(
      root_ + "/local/locks", *id, absl::InfinitePast(), Env::Default());
  ASSERT_TRUE(held.ok() && held->held());
  auto client = NewClient();
  std::vector<absl::StatusOr<CacheResult>> results(4);
  std::vector<std::thread> ranks;
  for (auto& result : results) {
    ranks.emplace_back([&] {
      result = client->GetOrCompile("neff", "1.0", "k7", Writes("recompiled"));
    });
  }
  absl::SleepFor(absl::Milliseconds(300));  // the ranks queue on the lock
  // The holder publishes an entry whose bytes are then torn in place (the
  // recorded file, other bytes: never served).
  StoreOptions store_options;
  store_options.root = root_ + "/neff";
  store_options.host_id = "holder";
  std::unique_ptr<Store> store = *Store::Open(store_options);
  ASSERT_TRUE(store
                  ->PublishBytes(*id, "good bytes", Sha256Hex("good bytes"),
                                 {"holder", 1}, {})
                  .ok());
  {
    std::fstream torn(store->ArtifactPath(*id),
                      std::ios::in | std::ios::out | std::ios::binary);
    torn.seekp(0);
    torn.write("torn", 4);
  }
  held->Release();
  for (std::thread& rank : ranks) rank.join();
  for (const absl::StatusOr<CacheResult>& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(ReadFile(r->path), "recompiled");
  }
  EXPECT_EQ(compiles_, 1);
  EXPECT_FALSE(
      std::filesystem::is_empty(root_ + "/neff/quarantine"));  // kept, aside
}

TEST_F(CacheClientTest, WholeOutputLeftByALostLeaseIsAdoptedNotRecompiled) {
  absl::StatusOr<EntryKey> id = EntryKey::Parse("neff", "1.0", "k5");
  {
    absl::StatusOr<WorkDir> dir = WorkDir::Claim(
        options_.debug_dir, *id, absl::InfinitePast(), Env::Default());
    ASSERT_TRUE(dir.ok()) << dir.status();
    WriteFile(dir->output_path(), "compiled before the daemon died");
    ASSERT_TRUE(dir->MarkComplete(*id).ok());
  }
  auto client = NewClient();
  absl::StatusOr<CacheResult> r =
      client->GetOrCompile("neff", "1.0", "k5", Writes("recompiled"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(compiles_, 0);
  EXPECT_EQ(ReadFile(r->path), "compiled before the daemon died");
  EXPECT_FALSE(Exists(root_ + "/debug/neuronx-cc/k5"));
}

// The marker fingerprints the output (issue 30: not its sha256, which the
// daemon computes): an output changed after it was marked, even to bytes of
// the same size, is compiled again; a marker an older client wrote (with
// the sha256) is still honoured.
TEST_F(CacheClientTest, OnlyTheOutputThatWasMarkedWholeIsAdopted) {
  absl::StatusOr<EntryKey> changed = EntryKey::Parse("neff", "1.0", "k8");
  absl::StatusOr<EntryKey> older = EntryKey::Parse("neff", "1.0", "k9");
  {
    absl::StatusOr<WorkDir> dir = WorkDir::Claim(
        options_.debug_dir, *changed, absl::InfinitePast(), Env::Default());
    ASSERT_TRUE(dir.ok()) << dir.status();
    WriteFile(dir->output_path(), "compiled before the daemon died");
    ASSERT_TRUE(dir->MarkComplete(*changed).ok());
    WriteFile(dir->output_path(), "COMPILED BEFORE THE DAEMON DIED");
  }
  const std::string bytes = "compiled by an older client";
  {
    absl::StatusOr<WorkDir> dir = WorkDir::Claim(
        options_.debug_dir, *older, absl::InfinitePast(), Env::Default());
    ASSERT_TRUE(dir.ok()) << dir.status();
    WriteFile(dir->output_path(), bytes);
    WriteFile(dir->path() + "/.neffd-complete",
              absl::StrCat("neff 1.0 k9 ", bytes.size(), " ", Sha256Hex(bytes),
                           "\n"));
  }
  auto client = NewClient();
  absl::StatusOr<CacheResult> recompiled =
      client->GetOrCompile("neff", "1.0", "k8", Writes("recompiled"));
  ASSERT_TRUE(recompiled.ok()) << recompiled.status();
  EXPECT_EQ(ReadFile(recompiled->path), "recompiled");
  EXPECT_EQ(compiles_, 1);
  absl::StatusOr<CacheResult> adopted =
      client->GetOrCompile("neff", "1.0", "k9", Writes("recompiled"));
  ASSERT_TRUE(adopted.ok()) << adopted.status();
  EXPECT_EQ(ReadFile(adopted->path), bytes);
  EXPECT_EQ(adopted->sha256, Sha256Hex(bytes));
  EXPECT_EQ(compiles_, 1);
}

TEST_F(CacheClientTest, PartialOutputOfAKilledCompileIsClearedFirst) {
  const std::string dir = root_ + "/debug/neuronx-cc/k6";
  std::filesystem::create_directories(dir);
  WriteFile(dir + "/module.neff", "half a ne");  // no completion marker
  WriteFile(dir + "/stray.tmp", "x");
  auto client = NewClient();
  CompileFn checks = [this](const CompileJob& job) {
    EXPECT_FALSE(Exists(job.output_path));
    EXPECT_FALSE(Exists(job.workdir + "/stray.tmp"));
    return Writes("whole")(job);
  };
  absl::StatusOr<CacheResult> r =
      client->GetOrCompile("neff", "1.0", "k6", checks);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(ReadFile(r->path), "whole");
  EXPECT_FALSE(Exists(dir));
}

TEST_F(CacheClientTest, ThreadsOfOneProcessCompileAKeyOnce) {
  auto client = NewClient();
  std::vector<std::thread> threads;
  std::atomic<int> ok{0};
  for (int i = 0; i < 8; ++i) {
    threads.emplace_back([&] {
      absl::StatusOr<CacheResult> r = client->GetOrCompile(
          "neff", "1.0", "shared", [&](const CompileJob& job) {
            absl::SleepFor(absl::Milliseconds(100));
            return Writes("once")(job);
          });
      if (r.ok() && ReadFile(r->path) == "once") ++ok;
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok, 8);
  EXPECT_EQ(compiles_, 1);
}

TEST_F(CacheClientTest, UnreachableDaemonFallsBackWithOneWarning) {
  options_.use_daemon = true;
  options_.address = absl::StrCat("unix:/tmp/neffd-none-", getpid(), ".sock");
  auto client = NewClient();
  for (const char* key : {"f1", "f2"}) {
    absl::StatusOr<CacheResult> r =
        client->GetOrCompile("neff", "1.0", key, Writes(key));
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_TRUE(r->fallback);
    EXPECT_EQ(ReadFile(r->path), key);
  }
  // Once per process: another test in this binary may have said it already.
  EXPECT_LE(warnings_.size(), 1u);
  EXPECT_EQ(client->counters().fallbacks, 2u);
}

TEST_F(CacheClientTest, MetricTablesAreWrittenPerRank) {
  options_.metric_tables = {"neff_cache", "allocator", "other"};
  options_.rank = 7;
  {
    auto client = NewClient();
    client->SetAllocatorStats([] {
      return std::vector<std::pair<std::string, int64_t>>{
          {"allocated_bytes.all.current", 4096}, {"num_ooms", 0}};
    });
    ASSERT_TRUE(client->GetOrCompile("neff", "1.0", "m1", Writes("n")).ok());
    ASSERT_TRUE(client->GetOrCompile("neff", "1.0", "m1", Writes("n")).ok());
  }  // destroyed: written
  const std::string table = ReadFile(root_ + "/metrics/neff_cache_rank7.csv");
  EXPECT_TRUE(absl::StartsWith(table, "metric,value\nlookups,2\nhits,1\n"))
      << table;
  EXPECT_TRUE(absl::StrContains(table, "\ncompiles,1\n")) << table;
  EXPECT_TRUE(absl::StrContains(table, "\nfallbacks,2\n")) << table;
  EXPECT_EQ(ReadFile(root_ + "/metrics/allocator_rank7.csv"),
            "metric,value\nallocated_bytes.all.current,4096\nnum_ooms,0\n");
}

TEST_F(CacheClientTest, DeriveKeyUsesTheConfiguredTargetAndMode) {
  options_.platform_target = "trn2";
  auto client = NewClient();
  absl::StatusOr<std::string> env_target =
      client->DeriveKey("HloModule m", "-O1", "1.0", "");
  absl::StatusOr<std::string> explicit_target =
      client->DeriveKey("HloModule m", "-O1", "1.0", "trn2");
  ASSERT_TRUE(env_target.ok() && explicit_target.ok());
  EXPECT_EQ(*env_target, *explicit_target);
  EXPECT_NE(*client->DeriveKey("HloModule m", "-O1", "1.0", "trn3"),
            *env_target);

  options_.platform_target = "";
  options_.compile_only = true;
  EXPECT_TRUE(absl::IsInvalidArgument(
      NewClient()->DeriveKey("HloModule m", "", "1.0", "").status()));

  options_.compile_only = false;
  options_.key_from_hlo = false;
  auto base = NewClient();
  EXPECT_EQ(*base->DeriveKey("HloModule a", "", "1.0", "trn2", "graph-1"),
            *base->DeriveKey("HloModule b", "", "1.0", "trn2", "graph-1"));
}

// Issue 19: a lock directory this user cannot use is no lock that excludes
// nothing: the rank compiles for itself, says why, and publishes nothing.
TEST_F(CacheClientTest, AnUnusableLockDirectoryCompilesUncachedWithAWarning) {
  std::filesystem::create_directories(root_ + "/local");
  WriteFile(root_ + "/local/locks", "not a directory");
  auto client = NewClient();
  absl::StatusOr<CacheResult> got =
      client->GetOrCompile("neff", "1.0", "abc123", Writes("NEFF bytes"));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(got->source, CacheResult::Source::kUncached);
  EXPECT_EQ(ReadFile(got->path), "NEFF bytes");
  EXPECT_FALSE(Exists(Files("abc123").done()));
  ASSERT_FALSE(warnings_.empty());
  EXPECT_TRUE(absl::StrContains(warnings_.back(),
                                "lock directory " + root_ + "/local/locks"))
      << warnings_.back();
}

}  // namespace
}  // namespace neffd
