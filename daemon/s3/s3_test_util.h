// daemon/s3/s3_test_util.h
//
// What the S3 tests share: a bucket name, clients for a test S3 server
// (tests/harness/servers.h) and an object round trip through real files.
//
// Test-only. Not thread-safe.
#ifndef NEFFD_DAEMON_S3_S3_TEST_UTIL_H_
#define NEFFD_DAEMON_S3_S3_TEST_UTIL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "daemon/s3/credentials.h"
#include "daemon/s3/s3_client.h"
#include "gtest/gtest.h"
#include "tests/harness/servers.h"

namespace neffd::remote {

inline constexpr char kTestBucket[] = "neffd-test";

// The environment that hands out the test server's credentials, and nothing
// that could reach off the machine (no metadata service, no home dir).
Environment TestServerEnvironment();

// A client of `server`'s kTestBucket; `options` supplies everything but the
// endpoint and bucket.
std::unique_ptr<S3Client> ClientFor(const test_support::LoopbackServer& server,
                                    CredentialsProvider* credentials,
                                    S3ClientOptions options = {});

// An unlinked temp file holding `content`; the caller closes the fd.
int TempFileWith(const std::string& content);

// Everything in `fd` from offset 0.
std::string ReadWhole(int fd);

// Uploads `content` as `key` with UploadFile and downloads it with
// GetObject; what came back.
// A fixture whose tests each get a fresh s3rver with kTestBucket on
// loopback, in `server_`.
class WithS3Server : public ::testing::Test {
 protected:
  void SetUp() override;

  std::unique_ptr<test_support::LoopbackServer> server_;
};

absl::StatusOr<std::string> PutAndGet(S3Client& client, const std::string& key,
                                      const std::string& content);

}  // namespace neffd::remote

#endif  // NEFFD_DAEMON_S3_S3_TEST_UTIL_H_
