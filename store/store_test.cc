#include "store/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/testing/manual_clock_env.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

namespace fs = std::filesystem;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class StoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = test_support::TestTempDir();
    StoreOptions options;
    options.root = root_;
    options.host_id = "hostA";
    options.failed_ttl = absl::Seconds(60);
    options.env = &clock_;
    store_ = *Store::Open(options);
  }

  absl::StatusOr<PublishResult> Put(const EntryKey& id,
                                    const std::string& bytes) {
    return store_->PublishBytes(id, bytes, Sha256Hex(bytes), {"hostA", 7}, {});
  }

  EntryState Inspect() { return store_->Inspect(id_); }

  std::string root_;
  ManualClockEnv clock_{absl::FromUnixSeconds(1'800'000'000)};
  std::unique_ptr<Store> store_;
  EntryKey id_ = *EntryKey::Parse("neff", "2.19.1", "abc123");
};

TEST(EntryKeyTest, RejectsEveryUnsafeTokenAndNamesTheField) {
  struct Case {
    std::string ns, version, key, field;
  };
  const std::string long_key(129, 'a');
  for (const Case& c : std::vector<Case>{
           {"neff", "1", "", "id.key"},
           {"neff", "1", "a/b", "id.key"},
           {"neff", "1", "..", "id.key"},
           {"neff", "1", ".", "id.key"},
           {"neff", "1", std::string("a\0b", 3), "id.key"},
           {"neff", "1", long_key, "id.key"},
           {"neff", "../x", "k", "id.compiler_version"},
           {"bogus", "1", "k", "id.namespace"},
       }) {
    absl::StatusOr<EntryKey> parsed = EntryKey::Parse(c.ns, c.version, c.key);
    ASSERT_FALSE(parsed.ok()) << c.key;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(parsed.status().message(), c.field))
        << parsed.status();
  }
  EXPECT_TRUE(EntryKey::Parse("hlo", "2.0", std::string(128, 'f')).ok());
  EXPECT_TRUE(EntryKey::Parse("neff", "1", "A-z_0.9+x").ok());
  // Any version: a TorchNeuron key commits to its compiler configuration.
  absl::StatusOr<EntryKey> any = EntryKey::Parse("neff", "", "k");
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->Canonical(), "neff//k");
  EXPECT_EQ(EntryKey::FromCanonical("neff//k")->key(), "k");
}

TEST_F(StoreTest, PublishWritesTorchNeuronsLayoutAndFindVerifiesIt) {
  absl::StatusOr<PublishResult> put = Put(id_, "neff-bytes");
  ASSERT_TRUE(put.ok()) << put.status();
  EXPECT_FALSE(put->already_cached);
  const std::string shard = root_ + "/ab/c1";
  const std::string records = shard + "/abc123.neffd";
  EXPECT_EQ(ReadAll(shard + "/abc123.neff"), "neff-bytes");
  EXPECT_NE(ReadAll(records + "/model.done").find(Sha256Hex("neff-bytes")),
            std::string::npos);
  EXPECT_EQ(put->stored.entry.path(), shard + "/abc123.neff");
  // Every file of the entry is named through PathsOf.
  const EntryPaths paths = store_->PathsOf(id_);
  EXPECT_EQ(paths.artifact(), shard + "/abc123.neff");
  EXPECT_EQ(paths.done(), records + "/model.done");
  EXPECT_EQ(paths.log(), records + "/model.log");
  EXPECT_EQ(paths.key_inputs(), records + "/" + kKeyInputsFileName);
  EXPECT_EQ(paths.lease(), records + "/" + kLeaseFileName);
  EXPECT_EQ(store_->RecordsDir(id_), records);

  absl::StatusOr<StoredEntry> found = store_->Find(id_);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->entry.size(), 10u);
  EXPECT_EQ(found->entry.producer_host(), "hostA");
  EXPECT_TRUE(store_->StillValid(id_, found->identity));
  // Any version finds it, and hears which version it has.
  absl::StatusOr<StoredEntry> any =
      store_->Find(*EntryKey::Parse("neff", "", "abc123"));
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->entry.id().compiler_version(), "2.19.1");
}

TEST_F(StoreTest, AnotherCompilerVersionsEntryIsAMissNotDamage) {
  ASSERT_TRUE(Put(id_, "neff-bytes").ok());
  absl::StatusOr<StoredEntry> other =
      store_->Find(*EntryKey::Parse("neff", "2.20.0", "abc123"));
  EXPECT_TRUE(absl::IsNotFound(other.status())) << other.status();
  EXPECT_NE(other.status().message().find("recorded for compiler version "
                                          "2.19.1"),
            absl::string_view::npos);
  EXPECT_EQ(store_->quarantined(), 0u);
  EXPECT_TRUE(store_->Find(id_).ok());
}

TEST_F(StoreTest, SecondPublishOfAKeyKeepsTheFirstContent) {
  ASSERT_TRUE(Put(id_, "first").ok());
  absl::StatusOr<PublishResult> again = Put(id_, "second");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->already_cached);
  EXPECT_EQ(ReadAll(store_->ArtifactPath(id_)), "first");
}

TEST_F(StoreTest, WrongDigestOrSizeLeavesNothingBehind) {
  absl::StatusOr<PublishResult> bad = store_->PublishBytes(
      id_, "content", Sha256Hex("other"), {"hostA", 1}, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(absl::StartsWith(bad.status().message(), "sha256:"));

  int fd = open((root_ + "/staged").c_str(), O_CREAT | O_RDWR, 0644);
  ASSERT_EQ(write(fd, "12345", 5), 5);
  lseek(fd, 0, SEEK_SET);
  absl::StatusOr<PublishResult> short_size =
      store_->PublishFromFd(id_, fd, 4, Sha256Hex("12345"), {"hostA", 1}, {});
  close(fd);
  EXPECT_TRUE(absl::StartsWith(short_size.status().message(), "size:"));
  EXPECT_TRUE(fs::is_empty(store_->RecordsDir(id_)));
  EXPECT_FALSE(fs::exists(store_->ArtifactPath(id_)));
  for (const auto& f :
       fs::directory_iterator(store_->PathsOf(id_).artifact_dir)) {
    EXPECT_EQ(f.path().filename(), "abc123.neffd");  // no temp file
  }
  EXPECT_TRUE(absl::IsNotFound(store_->Find(id_).status()));
}

// Damage in place (the record's file, other bytes: torn by a crashed
// writer, truncated, altered, rotted) is never served.
TEST_F(StoreTest, TruncatedArtifactIsQuarantinedAndReportedMissing) {
  ASSERT_TRUE(Put(id_, "0123456789").ok());
  StoredEntry before = *store_->Find(id_);
  ASSERT_EQ(truncate(store_->ArtifactPath(id_).c_str(), 3), 0);
  EXPECT_FALSE(store_->StillValid(id_, before.identity));
  EXPECT_TRUE(absl::IsNotFound(store_->Find(id_).status()));
  EXPECT_FALSE(fs::exists(store_->ArtifactPath(id_)));
  EXPECT_FALSE(fs::exists(store_->PathsOf(id_).done()));
  ASSERT_EQ(std::distance(fs::directory_iterator(root_ + "/quarantine"),
                          fs::directory_iterator()),
            1);
  EXPECT_EQ(store_->quarantined(), 1u);
  // The next publisher compiles into a fresh entry.
  absl::StatusOr<PublishResult> again = Put(id_, "0123456789");
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->already_cached);
}

// Runs `before_quarantine` once, just before this host moves an artifact
// into quarantine: the moment another host can have done it first.
class QuarantineRaceEnv : public EnvWrapper {
 public:
  explicit QuarantineRaceEnv(std::function<void()> before_quarantine)
      : EnvWrapper(Env::Default()),
        before_quarantine_(std::move(before_quarantine)) {}

 protected:
  absl::Status BeforeCall(const FsCall& call) override {
    if (call.op == FsOp::kRename &&
        absl::StrContains(call.target, "/quarantine/") && before_quarantine_) {
      std::function<void()> run = std::move(before_quarantine_);
      before_quarantine_ = nullptr;
      run();
    }
    return absl::OkStatus();
  }

 private:
  std::function<void()> before_quarantine_;
};

// Two hosts find the same damage; hostA quarantines it and republishes
// before hostB's quarantine: hostB must not move hostA's good entry away.
TEST_F(StoreTest, AQuarantineNeverMovesAnEntryRepublishedSinceItWasJudged) {
  ASSERT_TRUE(Put(id_, "0123456789").ok());
  ASSERT_EQ(truncate(store_->ArtifactPath(id_).c_str(), 3), 0);
  QuarantineRaceEnv race([&] {
    EXPECT_TRUE(absl::IsNotFound(store_->Find(id_).status()));
    EXPECT_TRUE(Put(id_, "0123456789").ok());
  });
  StoreOptions options;
  options.root = root_;
  options.host_id = "hostB";
  options.env = &race;
  std::unique_ptr<Store> host_b = *Store::Open(options);
  EXPECT_TRUE(absl::IsNotFound(host_b->Find(id_).status()));
  EXPECT_EQ(store_->quarantined(), 1u);
  EXPECT_EQ(host_b->quarantined(), 0u);
  EXPECT_EQ(ReadAll(store_->ArtifactPath(id_)), "0123456789");
  EXPECT_TRUE(store_->Find(id_).ok());
  EXPECT_TRUE(host_b->Find(id_).ok());
  // Only hostA's quarantine is there, with the truncated bytes.
  int quarantines = 0;
  for (const auto& q : fs::directory_iterator(root_ + "/quarantine")) {
    ++quarantines;
    EXPECT_EQ(
        ReadAll(q.path().string() + "/" + store_->PathsOf(id_).artifact_name),
        "012");
  }
  EXPECT_EQ(quarantines, 1);
}

// Two hosts find the same damage at once; hostA files it first: hostB
// files nothing (one damage, one quarantine).
TEST_F(StoreTest, TwoHostsJudgingOneDamageFileItOnce) {
  ASSERT_TRUE(Put(id_, "0123456789").ok());
  ASSERT_EQ(truncate(store_->ArtifactPath(id_).c_str(), 3), 0);
  QuarantineRaceEnv race(
      [&] { EXPECT_TRUE(absl::IsNotFound(store_->Find(id_).status())); });
  StoreOptions options;
  options.root = root_;
  options.host_id = "hostB";
  options.env = &race;
  std::unique_ptr<Store> host_b = *Store::Open(options);
  EXPECT_TRUE(absl::IsNotFound(host_b->Find(id_).status()));
  EXPECT_EQ(store_->quarantined(), 1u);
  EXPECT_EQ(host_b->quarantined(), 0u);
  std::vector<std::string> filed;
  for (const auto& q : fs::directory_iterator(root_ + "/quarantine")) {
    filed.push_back(q.path().filename().string());
  }
  ASSERT_EQ(filed.size(), 1u);
  EXPECT_NE(filed[0].find("hostA"), std::string::npos) << filed[0];
}

TEST_F(StoreTest, FlippedByteIsDetectedBySha256) {
  ASSERT_TRUE(Put(id_, "0123456789").ok());
  std::fstream f(store_->ArtifactPath(id_),
                 std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(4);
  f.put('X');
  f.close();
  EXPECT_TRUE(absl::IsNotFound(store_->Find(id_).status()));
  EXPECT_EQ(store_->quarantined(), 1u);
}

TEST_F(StoreTest, RewriteThatRestoresSizeAndMtimeIsStillNoticed) {
  ASSERT_TRUE(Put(id_, "0123456789").ok());
  StoredEntry verified = *store_->Find(id_);
  struct stat before;
  ASSERT_EQ(stat(store_->ArtifactPath(id_).c_str(), &before), 0);
  usleep(10000);
  {
    std::fstream f(store_->ArtifactPath(id_),
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(0);
    f.put('X');
  }
  struct timespec times[2] = {before.st_atim, before.st_mtim};
  ASSERT_EQ(utimensat(AT_FDCWD, store_->ArtifactPath(id_).c_str(), times, 0),
            0);
  EXPECT_FALSE(store_->StillValid(id_, verified.identity));
  EXPECT_TRUE(absl::IsNotFound(store_->Find(id_).status()));
}

// An unmodified TorchNeuron rank's put: the artifact alone, by rename.
TEST_F(StoreTest, AnArtifactNoRecordDescribesIsAdoptedAndRecorded) {
  fs::create_directories(store_->PathsOf(id_).artifact_dir);
  std::ofstream(store_->ArtifactPath(id_)) << "rank-bytes";
  absl::StatusOr<StoredEntry> found = store_->Find(id_);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->entry.sha256(), Sha256Hex("rank-bytes"));
  EXPECT_EQ(found->entry.producer_host(), "adopted");
  EXPECT_NE(ReadAll(store_->PathsOf(id_).done()).find(Sha256Hex("rank-bytes")),
            std::string::npos);
  EXPECT_TRUE(store_->StillValid(id_, found->identity));
  // A later put by a rank replaces the file (a new inode): adopted again,
  // never damage.
  const std::string tmp = store_->PathsOf(id_).artifact_dir + "/.tmp.x";
  std::ofstream(tmp) << "rank-bytes-2";
  fs::rename(tmp, store_->ArtifactPath(id_));
  found = store_->Find(id_);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->entry.sha256(), Sha256Hex("rank-bytes-2"));
  EXPECT_EQ(store_->quarantined(), 0u);
}

TEST_F(StoreTest, AnUnrecordedArtifactUnderALeaseIsServedNotRecorded) {
  fs::create_directories(store_->RecordsDir(id_));
  std::ofstream(store_->ArtifactPath(id_)) << "publishing";
  std::ofstream(store_->PathsOf(id_).lease()) << "h 1 l 0";
  EXPECT_TRUE(store_->Find(id_).ok());
  EXPECT_FALSE(fs::exists(store_->PathsOf(id_).done()));
}

TEST_F(StoreTest, AnEmptyArtifactIsAMissAsForTorchNeuron) {
  fs::create_directories(store_->PathsOf(id_).artifact_dir);
  std::ofstream(store_->ArtifactPath(id_));
  EXPECT_TRUE(absl::IsNotFound(store_->Find(id_).status()));
  EXPECT_TRUE(fs::exists(store_->ArtifactPath(id_)));
  EXPECT_EQ(store_->quarantined(), 0u);
}

// TorchNeuron's clear removes every *.neff: what is left is records.
TEST_F(StoreTest, AClearedEntryIsAMissNotDamage) {
  ASSERT_TRUE(Put(id_, "0123456789").ok());
  fs::remove(store_->ArtifactPath(id_));
  EXPECT_TRUE(absl::IsNotFound(store_->Find(id_).status()));
  EXPECT_EQ(store_->quarantined(), 0u);
  EXPECT_FALSE(fs::exists(root_ + "/quarantine"));
  // The records stay for gc (one open is the whole miss).
  EXPECT_TRUE(Inspect().has_done);
  // The next publish fills it again.
  absl::StatusOr<PublishResult> again = Put(id_, "0123456789");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->already_cached);
}

TEST_F(StoreTest, AnEmptyDoneMarkerRecordsNothing) {
  fs::create_directories(store_->RecordsDir(id_));
  std::ofstream(store_->ArtifactPath(id_)) << "legacy";
  std::ofstream(store_->PathsOf(id_).done());
  absl::StatusOr<StoredEntry> found = store_->Find(id_);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->entry.sha256(), Sha256Hex("legacy"));
}

TEST_F(StoreTest, FailureIsServedUntilItsRetryAfter) {
  clock_.Set(absl::Now());  // failures age by the log file's mtime
  absl::StatusOr<v1::Failure> recorded =
      store_->RecordFailure(id_, "error: bad op");
  ASSERT_TRUE(recorded.ok()) << recorded.status();
  std::optional<v1::Failure> failure = store_->FindFailure(id_);
  ASSERT_TRUE(failure.has_value());
  EXPECT_EQ(failure->log(), "error: bad op");
  EXPECT_EQ(failure->retry_after_unix_ms(), recorded->retry_after_unix_ms());
  clock_.Advance(absl::Seconds(61));
  EXPECT_FALSE(store_->FindFailure(id_).has_value());
  clock_.Set(clock_.Now() - absl::Seconds(61));
  ASSERT_TRUE(Put(id_, "fixed").ok());
  EXPECT_FALSE(store_->FindFailure(id_).has_value());
}

}  // namespace
}  // namespace neffd
