// Operating a real neffd: every neffctl command (text and --json), bad
// arguments (exit 2, one line), drain/undrain as the health service and Lock
// see it, the Prometheus textfile (checked by promtool), journald-style log
// lines, SIGHUP and SIGTERM.
#include <signal.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "proto/stat_fields.h"
#include "store/digest.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;
using grpc::health::v1::HealthCheckResponse;

bool WaitFor(const std::function<bool()>& done) {
  for (int i = 0; i < 100; ++i) {
    if (done()) return true;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return false;
}

class OpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = TestTempDir();
    metrics_ = root_ + "/neffd.prom";
    daemon_ = std::make_unique<DaemonProcess>(
        root_,
        std::vector<std::string>{"--metrics_textfile=" + metrics_,
                                 "--metrics_interval=1", "--v=2",
                                 "--env_file=" + root_ + "/neffd.env"},
        std::vector<std::string>{"JOURNAL_STREAM=8:1234"});
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
  }

  CommandResult Ctl(std::vector<std::string> args) {
    std::vector<std::string> argv = daemon_->NeffctlArgv();
    argv.insert(argv.end(), args.begin(), args.end());
    return RunCommand(argv);
  }

  void Put(const std::string& key, const std::string& content) {
    WriteFile(root_ + "/in.neff", content);
    CommandResult put = Ctl(
        {"--compiler_version=2.19.1", "put", "neff", key, root_ + "/in.neff"});
    ASSERT_EQ(put.exit_code, 0) << put.err;
  }

  HealthCheckResponse::ServingStatus Health() {
    auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
        daemon_->address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    grpc::health::v1::HealthCheckRequest request;
    HealthCheckResponse response;
    EXPECT_TRUE(stub->Check(&context, request, &response).ok());
    return response.status();
  }

  std::string root_, metrics_;
  std::unique_ptr<DaemonProcess> daemon_;
};

// Files of the host's local tier ({local_dir}/tier/{ns}/{version}/...).
std::vector<std::string> TierFiles(const std::string& local_dir) {
  std::vector<std::string> files;
  std::error_code error;
  for (const auto& f :
       fs::recursive_directory_iterator(local_dir + "/tier", error)) {
    if (f.is_regular_file()) files.push_back(f.path().filename().string());
  }
  return files;
}

TEST_F(OpsTest, EvictDropsTheHostsLocalCopyToo) {
  Put("ccc333", std::string(4096, 'c'));
  ASSERT_EQ(
      Ctl({"--compiler_version=2.19.1", "lookup", "neff", "ccc333"}).exit_code,
      0);
  auto has_copy = [&] {
    for (const std::string& name : TierFiles(daemon_->local_dir())) {
      if (absl::StartsWith(name, "ccc333.")) return true;
    }
    return false;
  };
  ASSERT_TRUE(has_copy()) << "publishing fills the host's tier";
  CommandResult evict =
      Ctl({"--compiler_version=2.19.1", "evict", "neff", "ccc333"});
  ASSERT_EQ(evict.exit_code, 0) << evict.err;
  EXPECT_FALSE(has_copy());
  EXPECT_EQ(
      Ctl({"--compiler_version=2.19.1", "lookup", "neff", "ccc333"}).exit_code,
      1);
}

TEST_F(OpsTest, EveryCommandAnswersInTextAndJson) {
  Put("aaa111", std::string(3000, 'a'));
  Put("bbb222", std::string(10, 'b'));
  ASSERT_EQ(
      Ctl({"--compiler_version=2.19.1", "lookup", "neff", "aaa111"}).exit_code,
      0);

  CommandResult stats = Ctl({"stats"});
  EXPECT_EQ(stats.exit_code, 0) << stats.err;
  for (const char* line :
       {"Lookups", "hits", "Compiles saved", "wait p50 / p99", "2.19.1"}) {
    EXPECT_TRUE(absl::StrContains(stats.out, line)) << line << "\n"
                                                    << stats.out;
  }
  // The table is what neffd.proto declares: every row of a part this daemon
  // has (no S3 tier, no etcd) is a line, and no row of the others is.
  for (const google::protobuf::Descriptor* d :
       {v1::Stats::descriptor(), v1::Leftovers::descriptor()}) {
    for (int i = 0; i < d->field_count(); ++i) {
      const v1::StatMetric& metric = StatMetricOf(d->field(i));
      if (metric.place() != v1::StatMetric::ROW || metric.row().empty()) {
        continue;
      }
      EXPECT_EQ(absl::StrContains(stats.out, "\n" + metric.row() + "  "),
                metric.section().empty())
          << metric.row() << "\n"
          << stats.out;
    }
  }
  EXPECT_TRUE(absl::StrContains(stats.out, " filesystem\n")) << stats.out;
  CommandResult json = Ctl({"--json", "stats"});
  EXPECT_TRUE(absl::StrContains(json.out, "\"compiles_saved\":\"1\""))
      << json.out;
  EXPECT_TRUE(absl::StrContains(json.out, "\"compiler_version\":\"2.19.1\""));

  CommandResult zero = Ctl({"stats", "-z"});
  EXPECT_EQ(zero.exit_code, 0) << zero.err;
  EXPECT_TRUE(absl::StrContains(zero.out, "zeroed"));
  json = Ctl({"--json", "stats"});
  EXPECT_TRUE(absl::StrContains(json.out, "\"hits\":\"0\"")) << json.out;
  EXPECT_TRUE(absl::StrContains(json.out, "\"entries\":\"2\"")) << json.out;

  CommandResult ls = Ctl({"ls", "--sort=size"});
  EXPECT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_LT(ls.out.find("aaa111"), ls.out.find("bbb222")) << ls.out;
  EXPECT_TRUE(absl::StrContains(ls.out, "2.9 KiB")) << ls.out;
  EXPECT_TRUE(absl::StrContains(ls.out, "2 of 2 entries")) << ls.out;
  ls = Ctl({"--json", "ls", "--limit=1", "--sort", "key"});
  EXPECT_TRUE(absl::StrContains(ls.out, "aaa111")) << ls.out;
  EXPECT_FALSE(absl::StrContains(ls.out, "bbb222")) << ls.out;
  EXPECT_EQ(Ctl({"ls", "--locked"}).out,
            "NAMESPACE  COMPILER  KEY  SIZE  "
            "LAST ACCESS  LOCKED\n0 of 0 "
            "entries\n");

  CommandResult show =
      Ctl({"--compiler-version=2.19.1", "show", "neff", "aaa111"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_TRUE(absl::StrContains(show.out, "sha256")) << show.out;
  EXPECT_EQ(
      Ctl({"--compiler-version=2.19.1", "show", "neff", "nope"}).exit_code, 1);

  CommandResult locks = Ctl({"locks"});
  EXPECT_EQ(locks.exit_code, 0) << locks.err;
  EXPECT_TRUE(absl::StrContains(locks.out, "0 leases held")) << locks.out;

  CommandResult config = Ctl({"config"});
  EXPECT_EQ(config.exit_code, 0) << config.err;
  EXPECT_TRUE(absl::StrContains(config.out, "metrics_textfile")) << config.out;
  EXPECT_TRUE(absl::StrContains(config.out, "TORCH_NEURONX_LOG_LEVEL"));
  EXPECT_TRUE(
      absl::StrContains(Ctl({"--json", "config"}).out, "\"origin\":\"flag\""));

  CommandResult health = Ctl({"health"});
  EXPECT_EQ(health.exit_code, 0);
  EXPECT_EQ(health.out, "SERVING\n");
}

// Sizes and ages take the units operators type (issue 29: one byte-size
// and one duration type for neffd and neffctl).
TEST_F(OpsTest, GcTakesSizesAndAgesWithUnits) {
  CommandResult gc =
      Ctl({"gc", "--max-size", "4GiB", "--older-than=7d", "--dry-run"});
  EXPECT_EQ(gc.exit_code, 0) << gc.err;
  CommandResult bad = Ctl({"gc", "--max-size=4 parsecs"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_TRUE(absl::StrContains(bad.err, "\"4 parsecs\" is not a size"))
      << bad.err;
}

TEST_F(OpsTest, BadArgumentsExitTwoWithOneLine) {
  const std::vector<std::vector<std::string>> bad = {
      {"--bogus", "stats"},
      {"--json=maybe", "stats"},
      {"ls", "--sort=age"},
      {"ls", "--limit=lots"},
      {"ls", "--namespace=xla"},
      {"ls", "--compiler_version=../x"},
      {"stats", "extra"},
      {"show", "neff", "k", "extra"},
      {"--compiler_version=1", "show", "neff", "../etc"},
      {"health", "--service=nope"},
      {"locks", "x"},
      {"drain", "now"},
      {"gc", "--max-size=lots"},
      {"gc", "--max-size", "4X"},
      {"gc", "--older-than=-1h"},
      {"manifest", "--since=soon"},
      {"frobnicate"},
      {},
  };
  for (const auto& args : bad) {
    CommandResult r = Ctl(args);
    EXPECT_EQ(r.exit_code, 2) << absl::StrJoin(args, " ") << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1)
        << absl::StrJoin(args, " ") << ": " << r.err;
  }
}

TEST_F(OpsTest, DrainStopsNewLeasesAndHealthSaysNotServing) {
  EXPECT_EQ(Health(), HealthCheckResponse::SERVING);
  // A lease out before the drain may still publish during it.
  auto held = daemon_->NewStub();
  v1::LockRequest before;
  before.mutable_id()->set_namespace_("hlo");
  before.mutable_id()->set_compiler_version("2.19.1");
  before.mutable_id()->set_key("inflight");
  v1::LockResponse lease;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(held->Lock(&context, before, &lease).ok());
    ASSERT_EQ(lease.outcome(), v1::LockResponse::GRANTED);
  }
  CommandResult drain = Ctl({"drain"});
  EXPECT_EQ(drain.exit_code, 0) << drain.err;
  EXPECT_EQ(Health(), HealthCheckResponse::NOT_SERVING);
  EXPECT_EQ(Ctl({"health"}).exit_code, 1);
  EXPECT_TRUE(absl::StrContains(Ctl({"locks"}).out, "DRAINING"));

  // No new lease while draining; lookups still work.
  auto stub = daemon_->NewStub();
  v1::LockRequest lock;
  lock.mutable_id()->set_namespace_("neff");
  lock.mutable_id()->set_compiler_version("2.19.1");
  lock.mutable_id()->set_key("k1");
  lock.set_wait(true);
  {
    grpc::ClientContext context;
    v1::LockResponse response;
    grpc::Status status = stub->Lock(&context, lock, &response);
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_TRUE(absl::StrContains(status.error_message(), "draining"));
  }
  EXPECT_EQ(
      Ctl({"--compiler_version=2.19.1", "lookup", "neff", "k1"}).exit_code, 1);

  EXPECT_EQ(Ctl({"undrain"}).exit_code, 0);
  EXPECT_EQ(Health(), HealthCheckResponse::SERVING);
  grpc::ClientContext context;
  v1::LockResponse response;
  ASSERT_TRUE(stub->Lock(&context, lock, &response).ok());
  EXPECT_EQ(response.outcome(), v1::LockResponse::GRANTED);
}

TEST_F(OpsTest, SigtermTellsParkedWaitersToRetry) {
  auto stub = daemon_->NewStub();
  v1::LockRequest lock;
  lock.mutable_id()->set_namespace_("neff");
  lock.mutable_id()->set_compiler_version("2.19.1");
  lock.mutable_id()->set_key("contended");
  lock.set_wait(true);
  v1::LockResponse first;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->Lock(&context, lock, &first).ok());
    ASSERT_EQ(first.outcome(), v1::LockResponse::GRANTED);
  }
  grpc::Status waited;
  std::thread waiter([&] {
    grpc::ClientContext context;
    v1::LockResponse response;
    waited = stub->Lock(&context, lock, &response);
  });
  ASSERT_TRUE(WaitFor(
      [&] { return absl::StrContains(Ctl({"locks"}).out, "1 waiters"); }));
  daemon_->Signal(SIGTERM);
  waiter.join();
  EXPECT_EQ(waited.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_TRUE(absl::StrContains(waited.error_message(), "retry"))
      << waited.error_message();
  EXPECT_EQ(daemon_->Wait(), 0);
}

TEST_F(OpsTest, HealthWatchStreamsEveryChange) {
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      daemon_->address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext context;
  grpc::health::v1::HealthCheckRequest request;
  auto watch = stub->Watch(&context, request);
  HealthCheckResponse status;
  ASSERT_TRUE(watch->Read(&status));
  EXPECT_EQ(status.status(), HealthCheckResponse::SERVING);
  ASSERT_EQ(Ctl({"drain"}).exit_code, 0);
  ASSERT_TRUE(watch->Read(&status));
  EXPECT_EQ(status.status(), HealthCheckResponse::NOT_SERVING);
  ASSERT_EQ(Ctl({"undrain"}).exit_code, 0);
  ASSERT_TRUE(watch->Read(&status));
  EXPECT_EQ(status.status(), HealthCheckResponse::SERVING);
  // SIGTERM ends the stream with a last NOT_SERVING.
  daemon_->Signal(SIGTERM);
  ASSERT_TRUE(watch->Read(&status));
  EXPECT_EQ(status.status(), HealthCheckResponse::NOT_SERVING);
  EXPECT_FALSE(watch->Read(&status));
  EXPECT_EQ(daemon_->Wait(), 0);
}

TEST_F(OpsTest, FailedAndLockedEntriesAreListed) {
  auto stub = daemon_->NewStub();
  v1::LockRequest lock;
  lock.mutable_id()->set_namespace_("neff");
  lock.mutable_id()->set_compiler_version("2.19.1");
  lock.mutable_id()->set_key("broken");
  lock.mutable_holder()->set_host("elsewhere");
  lock.mutable_holder()->set_pid(77);
  lock.mutable_holder()->set_rank(5);
  v1::LockResponse granted;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->Lock(&context, lock, &granted).ok());
    ASSERT_EQ(granted.outcome(), v1::LockResponse::GRANTED);
  }
  CommandResult locks = Ctl({"locks"});
  EXPECT_TRUE(absl::StrContains(locks.out, "neff/2.19.1/broken")) << locks.out;
  EXPECT_TRUE(absl::StrContains(locks.out, "elsewhere pid 77 rank 5"));
  CommandResult locked = Ctl({"ls", "--locked"});
  EXPECT_TRUE(absl::StrContains(locked.out, "broken")) << locked.out;
  EXPECT_TRUE(absl::StrContains(locked.out, "elsewhere pid 77 rank 5"));
  EXPECT_TRUE(
      absl::StrContains(Ctl({"--json", "locks"}).out, "\"rank\":\"5\""));

  v1::UnlockRequest unlock;
  unlock.set_lease_id(granted.lease().lease_id());
  *unlock.mutable_id() = lock.id();
  unlock.set_outcome(v1::UnlockRequest::FAILED);
  unlock.set_log("error: unsupported op");
  grpc::ClientContext context;
  v1::UnlockResponse unlocked;
  ASSERT_TRUE(stub->Unlock(&context, unlock, &unlocked).ok());
  CommandResult failed = Ctl({"ls", "--failed"});
  EXPECT_EQ(failed.exit_code, 0) << failed.err;
  EXPECT_TRUE(absl::StrContains(failed.out, "broken")) << failed.out;
  EXPECT_TRUE(absl::StrContains(failed.out, "error: unsupported op"));
  EXPECT_TRUE(absl::StrContains(failed.out, "1 of 1 recorded failures"));
  CommandResult show =
      Ctl({"--compiler_version=2.19.1", "show", "neff", "broken"});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_TRUE(absl::StrContains(show.out, "recorded compile failure"))
      << show.out;
}

// A million-entry index is listed a page at a time; the pages together are
// the index, each key once, in key order, and a forged token is refused.
TEST_F(OpsTest, ListEntriesPagesCoverTheIndexOnce) {
  auto stub = daemon_->NewStub();
  std::vector<std::string> keys;
  for (int i = 0; i < 5; ++i) {
    v1::EntryId id;
    id.set_namespace_("neff");
    id.set_compiler_version("2.19.1");
    id.set_key(absl::StrCat("page", i));
    ASSERT_TRUE(PublishInline(*stub, id, std::string(100 + i, 'p')).ok());
    keys.push_back(id.key());
  }
  auto admin = v1::CacheAdmin::NewStub(grpc::CreateChannel(
      daemon_->address(), grpc::InsecureChannelCredentials()));
  v1::ListEntriesRequest request;
  request.set_page_size(2);
  std::vector<std::string> listed;
  int pages = 0;
  do {
    grpc::ClientContext context;
    v1::ListEntriesResponse page;
    ASSERT_TRUE(admin->ListEntries(&context, request, &page).ok());
    ASSERT_LE(page.entries_size(), 2);
    EXPECT_EQ(page.total(), 5u);
    for (const v1::EntryInfo& info : page.entries()) {
      listed.push_back(info.id().key());
    }
    request.set_page_token(page.next_page_token());
    ASSERT_LT(++pages, 10) << "paging does not end";
  } while (!request.page_token().empty());
  EXPECT_EQ(listed, keys);
  EXPECT_GE(pages, 3);

  request.set_page_token("../../etc/passwd");
  grpc::ClientContext context;
  v1::ListEntriesResponse page;
  grpc::Status forged = admin->ListEntries(&context, request, &page);
  EXPECT_EQ(forged.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(absl::StrContains(forged.error_message(), "page_token"))
      << forged.error_message();
}

TEST_F(OpsTest, MetricsTextfilePassesPromtool) {
  Put("ccc333", "content");
  ASSERT_EQ(
      Ctl({"--compiler_version=2.19.1", "lookup", "neff", "ccc333"}).exit_code,
      0);
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(ReadFile(metrics_),
                             "neffd_lookups_total{namespace=\"neff\","
                             "result=\"hit\"} 1");
  })) << ReadFile(metrics_);
  const std::string text = ReadFile(metrics_);
  for (const char* name :
       {"neffd_lock_wait_seconds_bucket{le=\"+Inf\"} 1",
        "neffd_compiles_saved_total 1",
        "neffd_publish_bytes_total{namespace=\"neff\"} 7",
        "neffd_store_entries{namespace=\"neff\",compiler_version=\"2.19.1\"} 1",
        "neffd_quarantined_total 0", "neffd_leases_held 0"}) {
    EXPECT_TRUE(absl::StrContains(text, name)) << name << "\n" << text;
  }
  CommandResult check =
      RunCommand({"/bin/sh", "-c", "promtool check metrics < " + metrics_});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;

  // SIGHUP writes it again at once, even after it was removed.
  fs::remove(metrics_);
  daemon_->Signal(SIGHUP);
  EXPECT_TRUE(WaitFor([&] { return fs::exists(metrics_); }));
}

TEST_F(OpsTest, JournalPrioritiesSighupLevelAndCleanSigterm) {
  Put("ddd444", "x");
  // Under JOURNAL_STREAM every line starts with a syslog priority.
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(daemon_->process().Stderr(), "event=published");
  }));
  // SIGHUP re-reads the env file's log level (--v is not given here).
  DaemonProcess quiet(root_ + "/q", {"--env_file=" + root_ + "/neffd.env"},
                      {"JOURNAL_STREAM=8:1234"});
  ASSERT_TRUE(quiet.Start()) << quiet.process().Stderr();
  WriteFile(root_ + "/neffd.env", "# neffd\nTORCH_NEURONX_LOG_LEVEL=2\n");
  quiet.Signal(SIGHUP);
  ASSERT_TRUE(WaitFor([&] {
    return absl::StrContains(quiet.process().Stderr(), "event=reloaded v=2");
  })) << quiet.process().Stderr();
  quiet.Signal(SIGTERM);
  EXPECT_EQ(quiet.Wait(), 0);

  daemon_->Signal(SIGTERM);
  EXPECT_EQ(daemon_->Wait(), 0);
  const std::string err = daemon_->process().Stderr();
  EXPECT_TRUE(absl::StrContains(err, "<6>level=info event=started")) << err;
  EXPECT_TRUE(absl::StrContains(err, "<4>level=warning event=draining"));
  EXPECT_TRUE(absl::StrContains(err, "<4>level=warning event=stopped"));
  for (absl::string_view line : absl::StrSplit(err, '\n', absl::SkipEmpty())) {
    EXPECT_EQ(line[0], '<') << line;
  }
  // A restarted daemon serves the entry at once from its index.
  ASSERT_TRUE(daemon_->Start());
  CommandResult lookup =
      Ctl({"--compiler_version=2.19.1", "lookup", "neff", "ddd444"});
  EXPECT_EQ(lookup.exit_code, 0) << lookup.err;
}

// A datagram socket standing in for systemd's NOTIFY_SOCKET.
class NotifySocket {
 public:
  NotifySocket() {
    name_ = absl::StrCat("neffd-notify-", getpid());
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    name_.copy(addr.sun_path + 1, sizeof(addr.sun_path) - 2);  // abstract
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&addr),
                   offsetof(sockaddr_un, sun_path) + 1 + name_.size()),
              0);
    timeval timeout{5, 0};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  }
  ~NotifySocket() { close(fd_); }
  std::string env() const { return "NOTIFY_SOCKET=@" + name_; }
  // The next message containing `word`, or "" after 5 s of silence.
  std::string Await(absl::string_view word) {
    char buf[512];
    for (;;) {
      ssize_t n = recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) return "";
      std::string message(buf, n);
      if (absl::StrContains(message, word)) return message;
    }
  }

 private:
  std::string name_;
  int fd_;
};

TEST(SystemdTest, NotifiesReadyWatchdogAndStopping) {
  const std::string root = NewTempDir("notify");
  NotifySocket notify;
  DaemonProcess daemon(root, {}, {notify.env(), "WATCHDOG_USEC=400000"});
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  EXPECT_TRUE(absl::StrContains(notify.Await("READY=1"), "READY=1"));
  EXPECT_EQ(notify.Await("WATCHDOG=1"), "WATCHDOG=1");
  EXPECT_EQ(notify.Await("WATCHDOG=1"), "WATCHDOG=1");
  daemon.Signal(SIGTERM);
  EXPECT_TRUE(absl::StrContains(notify.Await("STOPPING=1"), "STOPPING=1"));
  EXPECT_EQ(daemon.Wait(), 0);
}

TEST_F(OpsTest, EnvFileDocumentsEveryVariableTheDaemonReads) {
  const std::string env_file = ReadFile(Runfile("deploy/neffd.env"));
  CommandResult config = Ctl({"--json", "config"});
  ASSERT_EQ(config.exit_code, 0) << config.err;
  int variables = 0;
  for (absl::string_view part : absl::StrSplit(config.out, "\"name\":\"")) {
    if (!absl::StartsWith(part, "TORCH_NEURONX_") &&
        !absl::StartsWith(part, "NEFFD_") &&
        !absl::StartsWith(part, "JOURNAL_")) {
      continue;
    }
    const std::string name(part.substr(0, part.find('"')));
    ++variables;
    EXPECT_TRUE(absl::StrContains(env_file, name)) << name;
  }
  EXPECT_GE(variables, 6);
}

}  // namespace
}  // namespace neffd::test_support
