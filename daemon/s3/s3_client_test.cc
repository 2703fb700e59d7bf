// S3Client against a real s3rver (tests/harness/servers.h) on loopback.
#include "daemon/s3/s3_client.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <random>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "daemon/s3/circuit_breaker.h"
#include "daemon/s3/s3_test_util.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "tests/harness/process.h"
#include "tests/harness/servers.h"

// ASan keeps freed memory resident in its quarantine (256 MiB by default),
// so every buffer libcurl frees between requests would count as peak RSS
// here and the bounded-memory check would measure ASan, not the client.
// ASAN_OPTIONS from the environment still override this.
#if defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() {
  return "quarantine_size_mb=4";
}
#endif

namespace neffd::remote {
namespace {

using ::neffd::test_support::LoopbackServer;

class S3ClientTest : public WithS3Server {
 protected:
  std::unique_ptr<S3Client> Client(S3ClientOptions options = {}) {
    return ClientFor(*server_, &credentials_, std::move(options));
  }

  // A client whose credentials differ from the server's in one variable.
  std::unique_ptr<S3Client> ClientWithEnv(const std::string& name,
                                          const std::string& value) {
    Environment env = TestServerEnvironment();
    env[name] = value;
    other_credentials_ = std::make_unique<CredentialsProvider>(
        CredentialsOptions{std::move(env)});
    return ClientFor(*server_, other_credentials_.get());
  }

  // How many request lines of the server's log contain `needle`.
  int CountRequests(absl::string_view needle) const {
    std::vector<std::string> log = server_->RequestLog();
    return std::count_if(log.begin(), log.end(), [&](const std::string& l) {
      return absl::StrContains(l, needle);
    });
  }

  CredentialsProvider credentials_{{TestServerEnvironment()}};
  std::unique_ptr<CredentialsProvider> other_credentials_;
};

std::string RandomBytes(size_t size, unsigned seed) {
  std::mt19937 random(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = static_cast<char>(random());
  return bytes;
}

TEST_F(S3ClientTest, PutThenGetIsByteExact) {
  std::unique_ptr<S3Client> client = Client();
  // '+' and '=' must survive both the URL and the signature.
  const std::string key = "p/neuronxcc-2.19.1+abc/MODULE_k=1/model.neff";
  const std::string content = RandomBytes((1 << 20) + 7, 1);

  absl::StatusOr<std::string> back = PutAndGet(*client, key, content);

  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == content) << "the object came back different";
  absl::StatusOr<ObjectInfo> info = client->HeadObject(key);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_EQ(info->size, content.size());
  EXPECT_FALSE(info->etag.empty());
}

TEST_F(S3ClientTest, UnsignedPayloadIsAccepted) {
  S3ClientOptions options;
  options.sign_payload = false;
  std::unique_ptr<S3Client> client = Client(options);

  absl::StatusOr<std::string> back = PutAndGet(*client, "unsigned", "abc");

  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, "abc");
}

TEST_F(S3ClientTest, MissingObjectIsNotFound) {
  std::unique_ptr<S3Client> client = Client();
  int fd = TempFileWith("");

  absl::StatusOr<uint64_t> got = client->GetObject("no/such/key", fd);
  absl::StatusOr<ObjectInfo> head = client->HeadObject("no/such/key");

  ASSERT_FALSE(got.ok());
  EXPECT_EQ(RemoteErrorCauseOf(got.status()), RemoteErrorCause::kNotFound)
      << got.status();
  EXPECT_EQ(got.status().message(),
            "S3 GET s3://neffd-test/no/such/key: HTTP 404 NoSuchKey: The "
            "specified key does not exist.");
  EXPECT_EQ(ReadWhole(fd), "") << "an error body went into the object's file";
  ASSERT_FALSE(head.ok());
  EXPECT_EQ(RemoteErrorCauseOf(head.status()), RemoteErrorCause::kNotFound);
  EXPECT_EQ(
      client->counters().errors[static_cast<int>(RemoteErrorCause::kNotFound)],
      2u);
  close(fd);
}

TEST_F(S3ClientTest, ListPagesWithContinuationAndDeleteRemoves) {
  std::unique_ptr<S3Client> client = Client();
  std::set<std::string> keys;
  for (int i = 0; i < 5; ++i) {
    keys.insert(absl::StrCat("list/entry", i, "/model.done"));
  }
  for (const std::string& key : keys) {
    ASSERT_TRUE(PutAndGet(*client, key, key).ok());
  }
  ASSERT_TRUE(PutAndGet(*client, "other/x", "x").ok());

  std::set<std::string> listed;
  int pages = 0;
  std::string token;
  do {
    absl::StatusOr<ListObjectsPage> page =
        client->ListObjectsV2("list/", token, /*max_keys=*/2);
    ASSERT_TRUE(page.ok()) << page.status();
    for (const ListedObject& object : page->objects) {
      listed.insert(object.key);
      EXPECT_EQ(object.size, object.key.size());
    }
    token = page->next_continuation_token;
    ++pages;
  } while (!token.empty() && pages < 10);
  EXPECT_EQ(listed, keys);
  EXPECT_EQ(pages, 3);

  ASSERT_TRUE(client->DeleteObject("list/entry0/model.done").ok());
  absl::StatusOr<ListObjectsPage> after = client->ListObjectsV2("list/", "");
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_EQ(after->objects.size(), 4u);
  EXPECT_EQ(
      RemoteErrorCauseOf(client->HeadObject("list/entry0/model.done").status()),
      RemoteErrorCause::kNotFound);
}

// Peak resident set size since the last ResetPeakRss().
int64_t PeakRssBytes() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    int64_t kib = 0;
    if (absl::StartsWith(line, "VmHWM:") &&
        absl::SimpleAtoi(
            absl::StripSuffix(absl::StripAsciiWhitespace(line.substr(6)), "kB"),
            &kib)) {
      return kib << 10;
    }
  }
  return -1;
}

bool ResetPeakRss() {
  std::ofstream clear("/proc/self/clear_refs");
  clear << "5";
  clear.flush();
  return clear.good();
}

// Writes `size` pseudo-random bytes to a new file a chunk at a time (never
// the whole object in memory) and returns their sha256.
std::string WriteLargeFile(int fd, uint64_t size) {
  Sha256 hash;
  for (uint64_t done = 0; done < size;) {
    std::string chunk = RandomBytes(std::min<uint64_t>(1 << 20, size - done),
                                    static_cast<unsigned>(done >> 20));
    hash.Update(chunk.data(), chunk.size());
    EXPECT_EQ(write(fd, chunk.data(), chunk.size()),
              static_cast<ssize_t>(chunk.size()));
    done += chunk.size();
  }
  return hash.HexDigest().value_or("(sha256 failed)");
}

std::string HashFile(int fd) {
  lseek(fd, 0, SEEK_SET);
  absl::StatusOr<CopyResult> result = CopyAndHash(fd, -1, "downloaded object");
  return result.ok() ? result->sha256 : result.status().ToString();
}

TEST_F(S3ClientTest, LargeObjectGoesMultipartAndStreamsInBoundedMemory) {
  constexpr uint64_t kSize = 64 << 20;
  constexpr uint64_t kPart = 8 << 20;
  S3ClientOptions options;
  options.part_size = kPart;
  options.multipart_threshold = 16 << 20;
  options.deadlines.total = absl::Minutes(2);
  std::unique_ptr<S3Client> client = Client(options);
  const std::string dir = test_support::NewTempDir("large");
  int source = open((dir + "/source").c_str(), O_RDWR | O_CREAT, 0644);
  int target = open((dir + "/target").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(source, 0);
  ASSERT_GE(target, 0);
  const std::string sha256 = WriteLargeFile(source, kSize);
  ASSERT_TRUE(ResetPeakRss()) << "cannot reset the peak RSS";
  const int64_t rss_before = PeakRssBytes();

  absl::Status upload = client->UploadFile("large/model.neff", source);
  absl::StatusOr<uint64_t> got = client->GetObject("large/model.neff", target);

  const int64_t growth = PeakRssBytes() - rss_before;
  printf("peak RSS growth moving %llu MiB up and down: %.1f MiB\n",
         static_cast<unsigned long long>(kSize >> 20),
         growth / double{1 << 20});
  ASSERT_TRUE(upload.ok()) << upload;
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, kSize);
  EXPECT_EQ(HashFile(target), sha256);
  EXPECT_EQ(CountRequests("?uploads="), 1);
  EXPECT_EQ(CountRequests("partNumber="), static_cast<int>(kSize / kPart));
  EXPECT_LT(growth, 16 << 20)
      << "peak RSS grew by " << (growth >> 20) << " MiB moving a 64 MiB object";
  // The parts, plus the small CompleteMultipartUpload body.
  EXPECT_GE(client->counters().bytes_uploaded, kSize);
  EXPECT_LT(client->counters().bytes_uploaded, kSize + 4096);
  close(source);
  close(target);
}

TEST_F(S3ClientTest, PartsSentAtOnceAssembleInOrder) {
  // Five parts, the last one short, with more senders than parts.
  constexpr uint64_t kSize = (23 << 20) + 12345;
  S3ClientOptions options;
  options.part_size = kMinPartSize;
  options.multipart_threshold = kMinPartSize;
  options.upload_concurrency = 8;
  std::unique_ptr<S3Client> client = Client(options);
  const std::string dir = test_support::NewTempDir("parallel");
  int source = open((dir + "/source").c_str(), O_RDWR | O_CREAT, 0644);
  int target = open((dir + "/target").c_str(), O_RDWR | O_CREAT, 0644);
  ASSERT_GE(source, 0);
  ASSERT_GE(target, 0);
  const std::string sha256 = WriteLargeFile(source, kSize);

  absl::Status upload = client->UploadFile("parallel/model.neff", source);
  absl::StatusOr<uint64_t> got =
      client->GetObject("parallel/model.neff", target);

  ASSERT_TRUE(upload.ok()) << upload;
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, kSize);
  EXPECT_EQ(HashFile(target), sha256);
  EXPECT_EQ(CountRequests("partNumber="), 5);
  close(source);
  close(target);
}

TEST_F(S3ClientTest, FailedPartAbortsTheUploadAndLeavesNoObject) {
  S3ClientOptions options;
  options.part_size = kMinPartSize;
  options.multipart_threshold = kMinPartSize;
  options.upload_concurrency = 3;
  options.sign_payload = false;  // as the daemon sends: read while sending
  std::unique_ptr<S3Client> client = Client(options);
  const std::string path = test_support::NewTempDir("unreadable") + "/neff";
  int writer = open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  ASSERT_GE(writer, 0);
  WriteLargeFile(writer, 12 << 20);
  // fstat works on a write-only descriptor; every pread of a part fails.

  absl::Status upload = client->UploadFile("unreadable/model.neff", writer);

  EXPECT_EQ(RemoteErrorCauseOf(upload), RemoteErrorCause::kOther) << upload;
  EXPECT_TRUE(absl::StrContains(upload.message(), "reading the request body"))
      << upload;
  EXPECT_EQ(
      RemoteErrorCauseOf(client->HeadObject("unreadable/model.neff").status()),
      RemoteErrorCause::kNotFound);
  EXPECT_EQ(CountRequests("DELETE"), 1) << "the upload is aborted once";
  close(writer);
}

TEST_F(S3ClientTest, WrongSecretKeyIsAccessDeniedWithOneClearMessage) {
  std::unique_ptr<S3Client> client =
      ClientWithEnv("AWS_SECRET_ACCESS_KEY", "not-the-secret");
  int fd = TempFileWith("x");

  absl::Status put = client->PutObject("k", fd, 0, 1);

  EXPECT_EQ(RemoteErrorCauseOf(put), RemoteErrorCause::kAccessDenied) << put;
  EXPECT_EQ(put.message(),
            "S3 PUT s3://neffd-test/k: HTTP 403 SignatureDoesNotMatch: The "
            "request signature we calculated does not match the signature "
            "you provided. Check your key and signing method.");
  close(fd);
}

TEST_F(S3ClientTest, UnknownAccessKeyIsAccessDenied) {
  std::unique_ptr<S3Client> client =
      ClientWithEnv("AWS_ACCESS_KEY_ID", "AKIDUNKNOWN");

  absl::Status list = client->ListObjectsV2("", "").status();

  EXPECT_EQ(RemoteErrorCauseOf(list), RemoteErrorCause::kAccessDenied) << list;
  EXPECT_TRUE(absl::StartsWith(
      list.message(), "S3 GET s3://neffd-test/: HTTP 403 InvalidAccessKeyId: "))
      << list;
}

TEST_F(S3ClientTest, KilledServerFailsWithinDeadlineAndOpensBreaker) {
  S3ClientOptions options;
  options.deadlines = {absl::Seconds(1), absl::Seconds(2)};
  std::unique_ptr<S3Client> client = Client(options);
  ASSERT_TRUE(PutAndGet(*client, "k", "v").ok());
  CircuitBreaker breaker({/*failure_threshold=*/3});
  server_->Kill();

  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(breaker.Allow()) << "call " << i;
    absl::Status head = client->HeadObject("k").status();
    breaker.Record(head);
    // Refused, not timed out: the call did not wait for its deadline.
    EXPECT_EQ(RemoteErrorCauseOf(head), RemoteErrorCause::kConnectionRefused)
        << head;
  }

  EXPECT_FALSE(breaker.Allow());
  CircuitBreakerStats stats = breaker.stats();
  EXPECT_EQ(stats.state, BreakerState::kOpen);
  EXPECT_EQ(stats.times_opened, 1u);
  EXPECT_EQ(stats.calls_skipped, 1u);
}

TEST_F(S3ClientTest, UnresponsiveServerTimesOutAtTheTotalDeadline) {
  S3ClientOptions options;
  options.deadlines = {absl::Seconds(1), absl::Seconds(1)};
  std::unique_ptr<S3Client> client = Client(options);
  // Stopped, its listening socket still accepts connections: nothing
  // answers.
  server_->process().Signal(SIGSTOP);

  const absl::Time start = absl::Now();
  absl::Status head = client->HeadObject("k").status();
  const absl::Duration took = absl::Now() - start;

  server_->process().Signal(SIGCONT);
  EXPECT_EQ(RemoteErrorCauseOf(head), RemoteErrorCause::kTimeout) << head;
  EXPECT_GE(took, absl::Seconds(1));
  EXPECT_LT(took, absl::Seconds(3));
}

TEST(S3ClientOptionsTest, CreateNamesTheBadOption) {
  CredentialsProvider credentials({TestServerEnvironment()});
  auto error = [&](S3ClientOptions options) {
    options.bucket = options.bucket.empty() ? "b" : options.bucket;
    return std::string(
        S3Client::Create(options, &credentials).status().message());
  };
  S3ClientOptions small_parts;
  small_parts.part_size = 1 << 20;
  S3ClientOptions ftp;
  ftp.endpoint = "ftp://host";
  S3ClientOptions region;
  region.region = "US East";
  S3ClientOptions no_senders;
  no_senders.upload_concurrency = 0;

  EXPECT_TRUE(absl::StartsWith(error(small_parts), "S3ClientOptions.part_size"))
      << error(small_parts);
  EXPECT_TRUE(absl::StartsWith(error(ftp), "S3ClientOptions.endpoint"));
  EXPECT_TRUE(absl::StartsWith(error(region), "S3ClientOptions.region"));
  EXPECT_TRUE(absl::StartsWith(error(no_senders),
                               "S3ClientOptions.upload_concurrency"));
}

}  // namespace
}  // namespace neffd::remote
