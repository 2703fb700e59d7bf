#include "daemon/s3/s3_test_util.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tests/harness/temp_dir.h"

namespace neffd::remote {

Environment TestServerEnvironment() {
  return {{"AWS_ACCESS_KEY_ID", test_support::kS3AccessKeyId},
          {"AWS_SECRET_ACCESS_KEY", test_support::kS3SecretAccessKey},
          {"HOME", "/nonexistent"},
          {"AWS_EC2_METADATA_DISABLED", "true"}};
}

std::unique_ptr<S3Client> ClientFor(const test_support::LoopbackServer& server,
                                    CredentialsProvider* credentials,
                                    S3ClientOptions options) {
  options.endpoint = server.url();
  options.bucket = kTestBucket;
  absl::StatusOr<std::unique_ptr<S3Client>> client =
      S3Client::Create(std::move(options), credentials);
  if (!client.ok()) {
    fprintf(stderr, "S3Client::Create: %s\n",
            client.status().ToString().c_str());
    abort();
  }
  return *std::move(client);
}

int TempFileWith(const std::string& content) {
  const char* tmp = getenv("TEST_TMPDIR");
  std::string path = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/s3.XXXXXX");
  int fd = mkstemp(path.data());
  if (fd < 0) abort();
  unlink(path.c_str());
  if (write(fd, content.data(), content.size()) !=
      static_cast<ssize_t>(content.size())) {
    abort();
  }
  return fd;
}

std::string ReadWhole(int fd) {
  std::string content;
  char buffer[1 << 16];
  for (off_t offset = 0;;) {
    ssize_t n = pread(fd, buffer, sizeof(buffer), offset);
    if (n <= 0) break;
    content.append(buffer, n);
    offset += n;
  }
  return content;
}

absl::StatusOr<std::string> PutAndGet(S3Client& client, const std::string& key,
                                      const std::string& content) {
  int source = TempFileWith(content);
  absl::Status put = client.UploadFile(key, source);
  close(source);
  if (!put.ok()) return put;
  int target = TempFileWith("");
  absl::StatusOr<uint64_t> got = client.GetObject(key, target);
  std::string back = ReadWhole(target);
  close(target);
  if (!got.ok()) return got.status();
  return back;
}

void WithS3Server::SetUp() {
  absl::StatusOr<std::unique_ptr<test_support::LoopbackServer>> server =
      test_support::StartS3Server(test_support::NewTempDir("s3rver"),
                                  kTestBucket);
  ASSERT_TRUE(server.ok()) << server.status();
  server_ = *std::move(server);
}

}  // namespace neffd::remote
