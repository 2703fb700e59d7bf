// What a publish leaves when the filesystem fails under it (through
// FaultInjectionEnv): the right status, nothing torn or half-named in the
// store, a miss for every reader, and a clean publish once the fault is gone.
// And a stalled filesystem call holds up only its own caller.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/store.h"
#include "store/testing/fault_injection_env.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

namespace fs = std::filesystem;

struct Fault {
  std::string name;
  FsOp op;
  int err;
  std::string path_contains;
  absl::StatusCode code;
  std::string step;  // the message names it
  int64_t nth = 1;   // which matching call fails
};

void PrintTo(const Fault& fault, std::ostream* os) { *os << fault.name; }

class PublishFaultTest : public ::testing::TestWithParam<Fault> {
 protected:
  void SetUp() override {
    root_ = test_support::NewTempDir(GetParam().name);
    fs::create_directories(root_ + "/staging");
    StoreOptions options;
    options.root = root_ + "/store";
    options.host_id = "hostA";
    options.env = &faults_;
    store_ = *Store::Open(options);
  }

  // Publishes `content` as the daemon does: from a staged file's descriptor.
  absl::StatusOr<PublishResult> PublishStaged(const std::string& content) {
    const std::string staged = root_ + "/staging/staged.neff";
    std::ofstream(staged, std::ios::binary | std::ios::trunc) << content;
    UniqueFd fd(open(staged.c_str(), O_RDONLY | O_CLOEXEC));
    return store_->PublishFromFd(id_, fd.get(), content.size(),
                                 Sha256Hex(content), {"hostA", 7}, {});
  }

  // Every name under the store that a publish writes before it is complete.
  std::vector<std::string> HalfNamed() const {
    std::vector<std::string> found;
    for (const auto& f : fs::recursive_directory_iterator(root_ + "/store")) {
      if (absl::StrContains(f.path().filename().string(), ".tmp.")) {
        found.push_back(f.path().string());
      }
    }
    return found;
  }

  // What every reader sees after a failed publish: no temp file, no
  // artifact without its marker, a miss.
  void ExpectNothingLeft() {
    EXPECT_EQ(HalfNamed(), std::vector<std::string>{});
    const EntryPaths paths = store_->PathsOf(id_);
    EXPECT_FALSE(fs::exists(paths.artifact()) && !fs::exists(paths.done()))
        << "an artifact without model.done";
    absl::StatusOr<StoredEntry> found =
        store_->Find(id_, Store::OnDamage::kReport);
    EXPECT_TRUE(absl::IsNotFound(found.status())) << found.status();
  }

  std::string root_;
  FaultInjectionEnv faults_;
  std::unique_ptr<Store> store_;
  EntryKey id_ = *EntryKey::Parse("neff", "2.19.1", "cafe01");
};

TEST_P(PublishFaultTest, FailsCleanlyAndTheNextPublishIsAHit) {
  const Fault& fault = GetParam();
  const std::string content(3 << 20, 'n');  // several pipeline chunks
  faults_.Fail(fault.op, fault.err, fault.path_contains, fault.nth);

  absl::StatusOr<PublishResult> failed = PublishStaged(content);
  ASSERT_FALSE(failed.ok());
  EXPECT_EQ(faults_.injected_failures(), 1);
  EXPECT_EQ(failed.status().code(), fault.code) << failed.status();
  EXPECT_TRUE(absl::StrContains(failed.status().message(), fault.step))
      << failed.status();
  ExpectNothingLeft();

  faults_.Clear();
  absl::StatusOr<PublishResult> published = PublishStaged(content);
  ASSERT_TRUE(published.ok()) << published.status();
  EXPECT_FALSE(published->already_cached);
  absl::StatusOr<StoredEntry> found = store_->Find(id_);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_EQ(found->entry.sha256(), Sha256Hex(content));
  EXPECT_EQ(HalfNamed(), std::vector<std::string>{});
}

INSTANTIATE_TEST_SUITE_P(
    Steps, PublishFaultTest,
    ::testing::Values(
        Fault{"NoSpaceForTheTempFile", FsOp::kOpen, ENOSPC, ".cafe01.neff.tmp.",
              absl::StatusCode::kResourceExhausted, "open "},
        Fault{"NoSpaceAtTheWrite", FsOp::kWrite, ENOSPC, ".cafe01.neff.tmp.",
              absl::StatusCode::kResourceExhausted, "write "},
        Fault{"FsyncFails", FsOp::kSync, EIO, ".cafe01.neff.tmp.",
              absl::StatusCode::kUnknown, "fsync "},
        Fault{"NoSpaceAtTheArtifactRename", FsOp::kRename, ENOSPC,
              "/cafe01.neff", absl::StatusCode::kResourceExhausted, "rename "},
        Fault{"NoSpaceForModelDone", FsOp::kWrite, ENOSPC, "model.done",
              absl::StatusCode::kResourceExhausted, "write "},
        Fault{"ModelDoneRenameFails", FsOp::kRename, EIO, "/model.done",
              absl::StatusCode::kUnknown, "rename "},
        // The shard directory's second fsync names the artifact (the first
        // names the records directory made in it).
        Fault{"ShardDirFsyncFails", FsOp::kSyncDir, EIO, "/ca/fe",
              absl::StatusCode::kUnknown, "fsync directory ", 2},
        Fault{"RecordsDirFsyncFails", FsOp::kSyncDir, EIO, "/cafe01.neffd",
              absl::StatusCode::kUnknown, "fsync directory "},
        Fault{"ModelDoneFsyncFails", FsOp::kSync, EIO, ".model.done.tmp.",
              absl::StatusCode::kUnknown, "fsync "},
        Fault{"CreatedDirFsyncFails", FsOp::kSyncDir, EIO, "/store/ca",
              absl::StatusCode::kUnknown, "fsync directory "}),
    [](const ::testing::TestParamInfo<Fault>& info) {
      return info.param.name;
    });

// Records the calls that make a publish durable, in order.
class SyncRecordingEnv : public EnvWrapper {
 public:
  SyncRecordingEnv() : EnvWrapper(Env::Default()) {}
  std::vector<std::string> calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 protected:
  absl::Status BeforeCall(const FsCall& call) override {
    if (call.op == FsOp::kSync || call.op == FsOp::kSyncDir ||
        call.op == FsOp::kRename) {
      std::string path(fs::path(std::string(call.path)).filename());
      if (absl::StrContains(path, ".tmp."))
        path = path.substr(0, path.find(".tmp.") + 4);
      absl::MutexLock lock(&mu_);
      calls_.push_back(absl::StrCat(FsOpName(call.op), " ", path));
    }
    return absl::OkStatus();
  }

 private:
  absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
};

// A store on `root` whose durability calls `recording` records.
std::unique_ptr<Store> OpenRecorded(const std::string& root,
                                    SyncRecordingEnv* recording) {
  StoreOptions options;
  options.root = root;
  options.host_id = "hostA";
  options.env = recording;
  return *Store::Open(options);
}

TEST(PublishDurabilityTest, SyncsDataNamesAndMarkerInOrder) {
  const std::string root = test_support::NewTempDir("durability");
  SyncRecordingEnv recording;
  std::unique_ptr<Store> store = OpenRecorded(root, &recording);
  const EntryKey id = *EntryKey::Parse("neff", "2.19.1", "durable01");
  const std::string bytes = "neff bytes";
  ASSERT_TRUE(store
                  ->PublishBytes(id, bytes, Sha256Hex(bytes), {"hostA", 1},
                                 {{kKeyInputsMetadata, "{}"}})
                  .ok());
  // The three new directories (two shards, the records) are named durably
  // in their parents, the artifact's data before its rename, its name (and
  // the shard's, the first time) and the key inputs before model.done
  // exists, model.done's data before its rename, and its name last.
  const std::string top = fs::path(root).filename().string();
  EXPECT_EQ(recording.calls(), (std::vector<std::string>{
                                   "fsync directory " + top,
                                   "fsync directory du",
                                   "fsync directory ra",
                                   "fsync .durable01.neff.tmp",
                                   "rename .durable01.neff.tmp",
                                   "fsync directory ra",
                                   "fsync directory du",
                                   "fsync directory " + top,
                                   "fsync .compile_flags.json.tmp",
                                   "rename .compile_flags.json.tmp",
                                   "fsync directory durable01.neffd",
                                   "fsync .model.done.tmp",
                                   "rename .model.done.tmp",
                                   "fsync directory durable01.neffd",
                               }));
}

TEST(PublishDurabilityTest, ShardDirectoriesAnotherWriterMadeAreNamedDurably) {
  const std::string root = test_support::NewTempDir("lease_made");
  SyncRecordingEnv recording;
  std::unique_ptr<Store> store = OpenRecorded(root, &recording);
  // A Lock's lease file makes the entry's directories without an fsync
  // (daemon/locks/file_locks.h), before the publish that needs their names.
  const EntryKey first = *EntryKey::Parse("neff", "2.19.1", "leased01");
  const EntryKey second = *EntryKey::Parse("neff", "2.19.1", "leased02");
  for (const EntryKey& id : {first, second}) {
    fs::create_directories(store->PathsOf(id).records_dir);
  }
  auto publish = [&](const EntryKey& id) {
    const std::string bytes = "bytes of " + id.key();
    return store->PublishBytes(id, bytes, Sha256Hex(bytes), {"hostA", 1}, {})
        .status();
  };
  ASSERT_TRUE(publish(first).ok());
  const std::string top = fs::path(root).filename().string();
  EXPECT_EQ(recording.calls(),
            (std::vector<std::string>{
                "fsync .leased01.neff.tmp",
                "rename .leased01.neff.tmp",
                "fsync directory as",
                "fsync directory le",  // the shard "le/as": "as" in "le"
                "fsync directory " + top,
                "fsync .model.done.tmp",
                "rename .model.done.tmp",
                "fsync directory leased01.neffd",
            }));
  // Once per shard: the second entry in it syncs only its own names.
  ASSERT_TRUE(publish(second).ok());
  const std::vector<std::string> calls = recording.calls();
  EXPECT_EQ(std::vector<std::string>(calls.begin() + 8, calls.end()),
            (std::vector<std::string>{
                "fsync .leased02.neff.tmp",
                "rename .leased02.neff.tmp",
                "fsync directory as",
                "fsync .model.done.tmp",
                "rename .model.done.tmp",
                "fsync directory leased02.neffd",
            }));
}

TEST(PublishStallTest, AStalledCallHoldsUpOnlyItsCaller) {
  const std::string root = test_support::NewTempDir("stall");
  FaultInjectionEnv faults;
  StoreOptions options;
  options.root = root;
  options.host_id = "hostA";
  options.env = &faults;
  std::unique_ptr<Store> store = *Store::Open(options);
  const EntryKey slow = *EntryKey::Parse("neff", "1.0", "slow");
  const EntryKey fast = *EntryKey::Parse("neff", "1.0", "fast");
  auto put = [&store](const EntryKey& id, const std::string& bytes) {
    return store->PublishBytes(id, bytes, Sha256Hex(bytes), {"hostA", 1}, {});
  };

  // The slow key's artifact rename hangs, as a call to a sick shared
  // filesystem can.
  faults.Stall(FsOp::kRename, "/slow.neff");
  std::atomic<bool> slow_returned{false};
  absl::Status slow_status;
  std::thread slow_publisher([&] {
    slow_status = put(slow, "slow bytes").status();
    slow_returned = true;
  });
  auto finish_slow = [&] {
    faults.Release();
    if (slow_publisher.joinable()) slow_publisher.join();
  };
  absl::Cleanup on_failure = finish_slow;
  ASSERT_TRUE(faults.AwaitStalled(absl::Seconds(30)));

  // Meanwhile every other key is published and served.
  ASSERT_TRUE(put(fast, "fast bytes").ok());
  absl::StatusOr<StoredEntry> hit = store->Find(fast);
  ASSERT_TRUE(hit.ok()) << hit.status();
  EXPECT_EQ(hit->entry.sha256(), Sha256Hex("fast bytes"));
  EXPECT_TRUE(
      absl::IsNotFound(store->Find(slow, Store::OnDamage::kReport).status()));
  EXPECT_FALSE(slow_returned);

  finish_slow();
  EXPECT_TRUE(slow_status.ok()) << slow_status;
  EXPECT_TRUE(store->Find(slow).ok());
}

}  // namespace
}  // namespace neffd
