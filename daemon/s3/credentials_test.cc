// The credentials chain, each link checked by a request the S3 test server
// (which verifies SigV4) accepts.
#include "daemon/s3/credentials.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "daemon/s3/remote_error.h"
#include "daemon/s3/s3_test_util.h"
#include "gtest/gtest.h"
#include "store/testing/manual_clock_env.h"
#include "tests/harness/process.h"
#include "tests/harness/servers.h"

namespace neffd::remote {
namespace {

using ::neffd::test_support::LoopbackServer;

// Nothing in the environment: no keys, no home, no reachable metadata.
Environment EmptyEnvironment() {
  return {{"HOME", test_support::NewTempDir("home")},
          {"AWS_EC2_METADATA_DISABLED", "true"}};
}

class CredentialsTest : public WithS3Server {
 protected:
  // A request signed with `provider`'s credentials goes through.
  void ExpectAcceptedByS3(CredentialsProvider& provider) {
    std::unique_ptr<S3Client> client = ClientFor(*server_, &provider);
    absl::StatusOr<std::string> back = PutAndGet(*client, "creds/k", "v");
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, "v");
  }
};

TEST_F(CredentialsTest, FromEnvironment) {
  Environment env = EmptyEnvironment();
  env["AWS_ACCESS_KEY_ID"] = test_support::kS3AccessKeyId;
  env["AWS_SECRET_ACCESS_KEY"] = test_support::kS3SecretAccessKey;
  env["AWS_SESSION_TOKEN"] = "env-token";
  CredentialsProvider provider({env});

  absl::StatusOr<AwsCredentials> credentials = provider.Get();

  ASSERT_TRUE(credentials.ok()) << credentials.status();
  EXPECT_EQ(credentials->source, "environment");
  EXPECT_EQ(credentials->session_token, "env-token");
  EXPECT_FALSE(credentials->expiration.has_value());
  ExpectAcceptedByS3(provider);
}

TEST_F(CredentialsTest, FromSharedFileWithProfile) {
  const std::string path = test_support::NewTempDir("aws") + "/credentials";
  test_support::WriteFile(path,
                          absl::StrCat("# comment\n"
                                       "[default]\n"
                                       "aws_access_key_id = AKIDDEFAULT\n"
                                       "aws_secret_access_key = wrong\n"
                                       "\n"
                                       "[neffd]\n"
                                       "aws_access_key_id = ",
                                       test_support::kS3AccessKeyId,
                                       "\n"
                                       "aws_secret_access_key = ",
                                       test_support::kS3SecretAccessKey, "\n"));
  Environment env = EmptyEnvironment();
  env["AWS_SHARED_CREDENTIALS_FILE"] = path;
  env["AWS_PROFILE"] = "neffd";
  CredentialsProvider provider({env});

  absl::StatusOr<AwsCredentials> credentials = provider.Get();

  ASSERT_TRUE(credentials.ok()) << credentials.status();
  EXPECT_EQ(credentials->access_key_id, test_support::kS3AccessKeyId);
  EXPECT_EQ(credentials->source,
            absl::StrCat("credentials file ", path, " [neffd]"));
  ExpectAcceptedByS3(provider);

  env.erase("AWS_PROFILE");
  absl::StatusOr<AwsCredentials> by_default = CredentialsProvider({env}).Get();
  ASSERT_TRUE(by_default.ok()) << by_default.status();
  EXPECT_EQ(by_default->access_key_id, "AKIDDEFAULT");
}

TEST_F(CredentialsTest, FileUnderHomeIsFound) {
  Environment env = EmptyEnvironment();
  test_support::NewTempDir("home/.aws");
  test_support::WriteFile(env["HOME"] + "/.aws/credentials",
                          "[default]\naws_access_key_id=A\n"
                          "aws_secret_access_key=S\n");

  absl::StatusOr<AwsCredentials> credentials = CredentialsProvider({env}).Get();

  ASSERT_TRUE(credentials.ok()) << credentials.status();
  EXPECT_EQ(credentials->secret_access_key, "S");
}

TEST_F(CredentialsTest, FromInstanceMetadataAndRefreshedBeforeExpiry) {
  absl::StatusOr<std::unique_ptr<LoopbackServer>> imds =
      test_support::StartImdsServer(test_support::kS3AccessKeyId,
                                    test_support::kS3SecretAccessKey,
                                    "neffd-role",
                                    /*lifetime_seconds=*/3600);
  ASSERT_TRUE(imds.ok()) << imds.status();
  Environment env = EmptyEnvironment();
  env.erase("AWS_EC2_METADATA_DISABLED");
  env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = (*imds)->url();
  ManualClockEnv clock(absl::Now());
  CredentialsOptions options{env};
  options.clock = &clock;
  CredentialsProvider provider(options);

  absl::StatusOr<AwsCredentials> first = provider.Get();
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->source, "instance metadata role neffd-role");
  EXPECT_EQ(first->session_token, "session-1");
  ASSERT_TRUE(first->expiration.has_value());
  ExpectAcceptedByS3(provider);
  EXPECT_EQ((*imds)->RequestLog(),
            (std::vector<std::string>{
                "PUT /latest/api/token 200",
                "GET /latest/meta-data/iam/security-credentials/ 200",
                "GET /latest/meta-data/iam/security-credentials/neffd-role "
                "200"}))
      << "cached credentials are used until they near expiry";

  // 54 minutes later they still have 6 minutes: kept.
  clock.Advance(absl::Minutes(54));
  EXPECT_EQ(provider.Get()->session_token, "session-1");
  // 56 minutes later, within 5 minutes of expiring: fetched again.
  clock.Advance(absl::Minutes(2));
  absl::StatusOr<AwsCredentials> refreshed = provider.Get();
  ASSERT_TRUE(refreshed.ok()) << refreshed.status();
  EXPECT_EQ(refreshed->session_token, "session-2");
  ExpectAcceptedByS3(provider);
}

TEST_F(CredentialsTest, UnreachableMetadataServiceFailsFastAfterwards) {
  absl::StatusOr<std::unique_ptr<LoopbackServer>> imds =
      test_support::StartImdsServer("A", "S", "role", 3600);
  ASSERT_TRUE(imds.ok()) << imds.status();
  Environment env = EmptyEnvironment();
  env.erase("AWS_EC2_METADATA_DISABLED");
  env["AWS_EC2_METADATA_SERVICE_ENDPOINT"] = (*imds)->url();
  (*imds)->Kill();
  ManualClockEnv clock(absl::Now());
  CredentialsOptions options{env};
  options.clock = &clock;
  CredentialsProvider provider(options);

  absl::Status first = provider.Get().status();
  absl::Status second = provider.Get().status();

  EXPECT_EQ(RemoteErrorCauseOf(first), RemoteErrorCause::kConnectionRefused)
      << first;
  EXPECT_TRUE(absl::StartsWith(first.message(), "instance metadata token: "))
      << first;
  EXPECT_EQ(second, first) << "the failure is remembered, not retried";
}

TEST(CredentialsErrorsTest, NamesWhatIsMissing) {
  Environment only_id = EmptyEnvironment();
  only_id["AWS_ACCESS_KEY_ID"] = "A";
  Environment bad_profile = EmptyEnvironment();
  const std::string path = test_support::NewTempDir("aws2") + "/credentials";
  test_support::WriteFile(path, "[default]\naws_access_key_id=A\n");
  bad_profile["AWS_SHARED_CREDENTIALS_FILE"] = path;
  Environment no_secret = bad_profile;
  bad_profile["AWS_PROFILE"] = "missing";

  auto error = [](const Environment& env) {
    absl::Status status = CredentialsProvider({env}).Get().status();
    EXPECT_EQ(RemoteErrorCauseOf(status), RemoteErrorCause::kAccessDenied);
    return std::string(status.message());
  };

  EXPECT_EQ(error(only_id),
            "AWS_SECRET_ACCESS_KEY is not set but AWS_ACCESS_KEY_ID is");
  EXPECT_EQ(error(bad_profile), absl::StrCat("AWS_PROFILE=missing: no "
                                             "[missing] section in ",
                                             path));
  EXPECT_EQ(error(no_secret),
            absl::StrCat(path, " [default]: aws_secret_access_key is missing"));
  EXPECT_TRUE(absl::StrContains(error(EmptyEnvironment()),
                                "AWS_EC2_METADATA_DISABLED=true"));
}

}  // namespace
}  // namespace neffd::remote
