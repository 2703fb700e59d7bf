// Issue 18, part 1: the shared store is untrusted. Each shape anyone who can
// write the store may plant (FIFO, socket, symlink to a root-only file,
// directory, 3 MB record, truncated record) stands at each path neffd reads
// (model.neff, model.done, compile_flags.json, the lease file) while 32
// clients look the keys up: every lookup answers within 2 s, no hit is
// served, GetStats answers within 100 ms throughout, each key can then be
// published afresh and is a hit, and the daemon stops cleanly on SIGTERM.
// The same for the fallback mode (no daemon).
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/cache_client.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/done_record.h"
#include "store/lock_paths.h"
#include "store/store.h"
#include "tests/harness/planted.h"
#include "tests/harness/process.h"
#include "tests/harness/store_files.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

constexpr char kVersion[] = "2.19.1";
constexpr int kClients = 32;
constexpr char kKeyInputs[] = R"({"flags": ["-O2"]})";

// GetStats' bound: 100 ms as the issue asks; the sanitizer builds (GCC
// defines __SANITIZE_ADDRESS__; the TSan build defines NEFFD_TSAN) run the
// daemon 2-5x slower, so they get 300 ms.
#if defined(__SANITIZE_ADDRESS__) || defined(NEFFD_TSAN)
constexpr absl::Duration kStatsBound = absl::Milliseconds(300);
#else
constexpr absl::Duration kStatsBound = absl::Milliseconds(100);
#endif

struct PlantedKey {
  std::string file;
  PlantedShape shape;
  std::string key;
  // Set before the key is published afresh: a hit is fine from then on.
  std::atomic<bool> republishing{false};
};

std::string NeffBytes(const std::string& key) { return "neff of " + key; }

// A done record for `bytes`, as a publisher writes it.
std::string DoneJson(const std::string& key, const std::string& bytes) {
  v1::DoneRecord done;
  done.set_size(bytes.size());
  done.set_sha256(Sha256Hex(bytes));
  done.set_compiler_version(kVersion);
  done.set_key(key);
  done.set_producer_host("elsewhere");
  return *DoneRecordToJson(done);
}

void Write(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary) << content;
}

// One entry per (file, shape) under {neff_root}: the shape at `file`, beside
// the rest of a complete entry when `file` is part of one (so only the
// planted file makes it unusable).
std::vector<std::unique_ptr<PlantedKey>> PlantAll(
    const std::string& neff_root) {
  std::vector<std::unique_ptr<PlantedKey>> keys;
  for (const std::string& file : std::vector<std::string>{
           "model.neff", "model.done", kKeyInputsFileName, kLeaseFileName}) {
    for (PlantedShape shape : AllPlantedShapes()) {
      const bool regular = shape == PlantedShape::kHugeRecord ||
                           shape == PlantedShape::kTruncatedRecord;
      // A regular file at the artifact's name is an unmodified TorchNeuron
      // rank's put: a new artifact, adopted (store/store_test.cc).
      if (file == "model.neff" && regular) continue;
      auto k = std::make_unique<PlantedKey>();
      k->file = file;
      k->shape = shape;
      k->key = absl::StrCat(keys.size(), "_", PlantedShapeName(shape));
      const EntryFiles files = FilesOf(neff_root, k->key);
      fs::create_directories(files.records);
      const std::string bytes = NeffBytes(k->key);
      if (file == "model.neff") Write(files.done, DoneJson(k->key, bytes));
      if (file == "model.done") Write(files.artifact, bytes);
      Plant(file == "model.neff"   ? files.artifact
            : file == "model.done" ? files.done
                                   : absl::StrCat(files.records, "/", file),
            shape);
      keys.push_back(std::move(k));
    }
  }
  return keys;
}

// What one lookup said: a hit, a miss, or an error.
using LookupFn =
    std::function<absl::StatusOr<bool>(int client, const std::string& key)>;

// `kClients` threads looking every key up in turn until Stop().
class LookupStorm {
 public:
  LookupStorm(const std::vector<std::unique_ptr<PlantedKey>>& keys,
              LookupFn lookup)
      : keys_(keys), lookup_(std::move(lookup)) {
    for (int c = 0; c < kClients; ++c) {
      threads_.emplace_back([this, c] { Run(c); });
    }
  }
  ~LookupStorm() { Stop(); }

  void Stop() {
    stop_ = true;
    for (std::thread& t : threads_) {
      if (t.joinable()) t.join();
    }
  }
  // Lookups answered so far.
  int64_t answered() const { return answered_; }
  absl::Duration slowest() {
    absl::MutexLock lock(&mu_);
    return slowest_;
  }
  std::vector<std::string> problems() {
    absl::MutexLock lock(&mu_);
    return problems_;
  }

 private:
  void Run(int client) {
    for (size_t i = client; !stop_; ++i) {
      const PlantedKey& k = *keys_[i % keys_.size()];
      const absl::Time start = absl::Now();
      absl::StatusOr<bool> hit = lookup_(client, k.key);
      const absl::Duration took = absl::Now() - start;
      // Read after the answer: a lookup that overlapped the new publish may
      // see it.
      const bool may_hit = k.republishing;
      // Ranks between steps, not a spin: the figure is the daemon's answer
      // time, not how 32 busy loops share two cores.
      absl::SleepFor(absl::Milliseconds(5));
      ++answered_;
      absl::MutexLock lock(&mu_);
      slowest_ = std::max(slowest_, took);
      if (!hit.ok()) {
        problems_.push_back(absl::StrCat(k.key, ": ", hit.status().ToString()));
      } else if (*hit && !may_hit) {
        problems_.push_back(absl::StrCat(k.key, ": a hit was served"));
      }
    }
  }

  const std::vector<std::unique_ptr<PlantedKey>>& keys_;
  const LookupFn lookup_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> answered_{0};
  absl::Mutex mu_;
  absl::Duration slowest_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> problems_ ABSL_GUARDED_BY(mu_);
  std::vector<std::thread> threads_;
};

CacheClientOptions ClientOptions(const std::string& root,
                                 const std::string& address) {
  CacheClientOptions options;
  options.address = address;
  options.use_daemon = !address.empty();
  options.neff_cache_dir = root + "/neff";
  options.hlo_cache_dir = root + "/hlo";
  options.local_dir = root + "/local";
  options.debug_dir = root + "/debug";
  options.lock_timeout = absl::Seconds(60);
  options.warn = [](const std::string&) {};
  return options;
}

// Publishes every key afresh (one thread each, as ranks would) and checks it
// is then a hit; `fallback` is how each publish must have gone.
void RepublishAll(const std::vector<std::unique_ptr<PlantedKey>>& keys,
                  const CacheClientOptions& options, bool fallback) {
  CacheClient client(options);
  std::vector<std::thread> ranks;
  for (const auto& k : keys) {
    ranks.emplace_back([&client, &k, fallback] {
      SCOPED_TRACE(absl::StrCat(k->file, " ", PlantedShapeName(k->shape)));
      k->republishing = true;
      absl::StatusOr<CacheResult> result =
          client.GetOrCompile("neff", kVersion, k->key,
                              [&](const CompileJob& job) {
                                Write(job.output_path, NeffBytes(k->key));
                                return CompileResult::Ok();
                              },
                              {{kKeyInputsMetadata, kKeyInputs}});
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(result->source, CacheResult::Source::kCompiled);
      EXPECT_EQ(result->fallback, fallback);
      absl::StatusOr<std::optional<CacheResult>> hit =
          client.Lookup("neff", kVersion, k->key);
      ASSERT_TRUE(hit.ok()) << hit.status();
      ASSERT_TRUE(hit->has_value());
      EXPECT_EQ((*hit)->sha256, Sha256Hex(NeffBytes(k->key)));
    });
  }
  for (std::thread& t : ranks) t.join();
}

class PlantedFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TestTempDir();
    keys_ = PlantAll(root_ + "/neff");
  }

  std::string root_;
  std::vector<std::unique_ptr<PlantedKey>> keys_;
};

TEST_F(PlantedFilesTest, DaemonAnswersEveryLookupAndHealsEveryKey) {
  // A foreign lease file is broken once unchanged for the TTL: kept short.
  DaemonProcess daemon(root_, {"--lease_ttl=2"});
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < kClients; ++c) {
    channels.push_back(grpc::CreateCustomChannel(
        daemon.address(), grpc::InsecureChannelCredentials(), [c] {
          grpc::ChannelArguments args;  // one connection per client
          args.SetInt("neffd.client", c);
          return args;
        }()));
    // Connected before the clock starts: the figures are answers, not
    // connection set-ups.
    ASSERT_TRUE(channels.back()->WaitForConnected(
        std::chrono::system_clock::now() + std::chrono::seconds(10)));
  }
  auto stats_stub = daemon.NewStub();
  {
    v1::Stats warm;
    grpc::ClientContext context;
    ASSERT_TRUE(
        stats_stub->GetStats(&context, v1::GetStatsRequest(), &warm).ok());
  }
  LookupStorm storm(keys_, [&](int client, const std::string& key) {
    auto stub = v1::CompileCache::NewStub(channels[client]);
    v1::LookupRequest request;
    request.mutable_id()->set_namespace_("neff");
    request.mutable_id()->set_compiler_version(kVersion);
    request.mutable_id()->set_key(key);
    v1::LookupResponse response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(2));
    grpc::Status status = stub->Lookup(&context, request, &response);
    if (!status.ok())
      return absl::StatusOr<bool>(absl::UnknownError(
          absl::StrCat(status.error_code(), " ", status.error_message())));
    return absl::StatusOr<bool>(response.result() == v1::LookupResponse::HIT);
  });

  // GetStats, on its own connection, throughout.
  std::atomic<bool> stop_stats{false};
  std::vector<absl::Duration> stats_times;
  std::thread stats([&] {
    while (!stop_stats) {
      v1::Stats out;
      grpc::ClientContext context;
      context.set_deadline(std::chrono::system_clock::now() +
                           std::chrono::seconds(2));
      const absl::Time start = absl::Now();
      EXPECT_TRUE(
          stats_stub->GetStats(&context, v1::GetStatsRequest(), &out).ok());
      stats_times.push_back(absl::Now() - start);
      absl::SleepFor(absl::Milliseconds(20));
    }
  });

  // Every key looked up a few times while only the planted files stand.
  ASSERT_TRUE(PollUntil(
      [&] {
        return storm.answered() >= 4 * static_cast<int64_t>(keys_.size());
      },
      absl::Seconds(30)));
  RepublishAll(keys_, ClientOptions(root_, daemon.address()),
               /*fallback=*/false);
  storm.Stop();
  stop_stats = true;
  stats.join();

  for (const std::string& problem : storm.problems()) ADD_FAILURE() << problem;
  EXPECT_LE(storm.slowest(), absl::Seconds(2));
  ASSERT_FALSE(stats_times.empty());
  std::sort(stats_times.begin(), stats_times.end());
  const absl::Duration stats_p90 = stats_times[stats_times.size() * 9 / 10];
  // Every GetStats, throughout (the test runs alone: tagged exclusive).
  EXPECT_LE(stats_times.back(), kStatsBound);
  std::printf(
      "%lld lookups, slowest %.1f ms; %zu GetStats, median %.1f ms, p90 %.1f "
      "ms, slowest %.1f ms\n",
      static_cast<long long>(storm.answered()),
      absl::ToDoubleMilliseconds(storm.slowest()), stats_times.size(),
      absl::ToDoubleMilliseconds(stats_times[stats_times.size() / 2]),
      absl::ToDoubleMilliseconds(stats_p90),
      absl::ToDoubleMilliseconds(stats_times.back()));
  EXPECT_FALSE(fs::is_empty(root_ + "/neff/quarantine"));

  const absl::Time term = absl::Now();
  daemon.Signal(SIGTERM);
  EXPECT_EQ(daemon.Wait(), 0);
  std::printf("%s\n", daemon.process().Stderr().c_str());
  // With the 32 clients still connected (idle), well within
  // --shutdown_grace (10 s): tests/shutdown_test.cc says why.
  const absl::Duration stopped = absl::Now() - term;
  std::printf("SIGTERM to exit: %.0f ms\n",
              absl::ToDoubleMilliseconds(stopped));
  EXPECT_LE(stopped, absl::Seconds(3));
}

TEST_F(PlantedFilesTest, FallbackAnswersEveryLookupAndHealsEveryKey) {
  const CacheClientOptions options = ClientOptions(root_, "");
  CacheClient client(options);
  LookupStorm storm(keys_, [&](int, const std::string& key) {
    absl::StatusOr<std::optional<CacheResult>> found =
        client.Lookup("neff", kVersion, key);
    if (!found.ok()) return absl::StatusOr<bool>(found.status());
    return absl::StatusOr<bool>(found->has_value());
  });
  ASSERT_TRUE(PollUntil(
      [&] {
        return storm.answered() >= 4 * static_cast<int64_t>(keys_.size());
      },
      absl::Seconds(30)));
  RepublishAll(keys_, options, /*fallback=*/true);
  storm.Stop();
  for (const std::string& problem : storm.problems()) ADD_FAILURE() << problem;
  EXPECT_LE(storm.slowest(), absl::Seconds(2));
  std::printf("%lld fallback lookups, slowest %.1f ms\n",
              static_cast<long long>(storm.answered()),
              absl::ToDoubleMilliseconds(storm.slowest()));
}

}  // namespace
}  // namespace neffd::test_support
