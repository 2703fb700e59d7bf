// A 512 MiB NEFF through the S3 tier (issue 20): uploaded by the host that
// published it (multipart, streamed from the shared store) and downloaded by
// a host of another cluster (streamed into staging), each daemon's peak RSS
// growing by less than 64 MiB: memory does not follow the NEFF's size.

#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/harness/cluster.h"
#include "tests/harness/process.h"
#include "tests/harness/remote_env.h"
#include "tests/harness/servers.h"
#include "tests/harness/temp_dir.h"

namespace neffd::test_support {
namespace {

constexpr uint64_t kNeffBytes = uint64_t{512} << 20;
// sha256 of 512 MiB of zero bytes.
constexpr char kZerosSha256[] =
    "9acca8e8c22201155389f65abbf6bc9723edc7384ead80503839f49dcc56d767";
constexpr int64_t kMaxGrowthKiB = 64 << 10;

// The process's peak resident set (VmHWM), in KiB.
int64_t PeakRssKiB(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (!absl::ConsumePrefix(&rest, "VmHWM:")) continue;
    rest = absl::StripAsciiWhitespace(rest);
    int64_t kib = 0;
    if (absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &kib)) return kib;
  }
  return -1;
}

TEST(RemoteLargeTest, HalfGigabyteNeffMovesWithFlatMemory) {
  const std::string root = NewTempDir("remote_large");
  absl::StatusOr<std::unique_ptr<LoopbackServer>> s3 =
      StartS3Server(root + "/s3", kRemoteBucket);
  ASSERT_TRUE(s3.ok()) << s3.status();
  std::vector<std::string> flags = RemoteFlags(**s3);
  flags.push_back("--s3_timeout=600");  // one GET of the whole NEFF
  flags.push_back("--lease_ttl=10");    // the fetch outlives several TTLs
  std::vector<std::string> env = S3Env();
  // Under ASan, freed blocks wait in a quarantine of up to 256 MiB, which
  // would be counted as the daemon's growth: keep it small.
  if (const char* asan = std::getenv("ASAN_OPTIONS")) {
    env.push_back(absl::StrCat("ASAN_OPTIONS=", asan, ":quarantine_size_mb=8"));
  }
  Cluster a(root + "/a", flags);
  Cluster b(root + "/b", flags);
  DaemonProcess& publisher = a.AddHost("a0", env);
  DaemonProcess& reader = b.AddHost("b0", env);

  const v1::LockResponse granted = LockKey(publisher, NeffId("big"));
  ASSERT_EQ(granted.outcome(), v1::LockResponse::GRANTED);
  const int64_t publisher_before = PeakRssKiB(publisher.process().pid());
  const std::string staged = granted.lease().staging_dir() + "/big.neff";
  WriteFile(staged, "");
  ASSERT_EQ(truncate(staged.c_str(), kNeffBytes), 0);  // sparse: quick
  v1::PublishRequest publish;
  publish.set_lease_id(granted.lease().lease_id());
  *publish.mutable_id() = NeffId("big");
  publish.set_staged_path(staged);
  publish.set_size(kNeffBytes);
  publish.set_sha256(kZerosSha256);
  v1::PublishResponse published;
  grpc::ClientContext context;
  ASSERT_TRUE(publisher.NewStub()->Publish(&context, publish, &published).ok());
  v1::Stats stats;
  ASSERT_TRUE(WaitUntil(
      [&] {
        stats = StatsOf(publisher);
        return stats.remote_uploads() == 1;
      },
      absl::Minutes(10)))
      << stats.ShortDebugString();
  EXPECT_GE(stats.remote_bytes_out(), kNeffBytes);
  EXPECT_GT(CountRequests(**s3, "PUT", ObjectName("big", "model.neff")), 1)
      << "expected a multipart upload";
  const int64_t publisher_growth =
      PeakRssKiB(publisher.process().pid()) - publisher_before;

  const int64_t reader_before = PeakRssKiB(reader.process().pid());
  const v1::LockResponse hit = LockKey(reader, NeffId("big"));
  ASSERT_EQ(hit.outcome(), v1::LockResponse::READY) << hit.ShortDebugString();
  EXPECT_EQ(hit.entry().size(), kNeffBytes);
  EXPECT_EQ(hit.entry().sha256(), kZerosSha256);
  const int64_t reader_growth =
      PeakRssKiB(reader.process().pid()) - reader_before;
  EXPECT_EQ(StatsOf(reader).hits_remote(), 1u);

  EXPECT_LT(publisher_growth, kMaxGrowthKiB)
      << "upload grew the daemon's peak RSS by " << publisher_growth << " KiB";
  EXPECT_LT(reader_growth, kMaxGrowthKiB)
      << "download grew the daemon's peak RSS by " << reader_growth << " KiB";
  // For docs/REMOTE.md.
  std::printf("peak RSS growth: upload %lld KiB, download %lld KiB\n",
              static_cast<long long>(publisher_growth),
              static_cast<long long>(reader_growth));
}

}  // namespace
}  // namespace neffd::test_support
