// daemon/s3/credentials.h
//
// AWS credentials from the standard chain, the order the AWS SDKs use:
//   1. the environment: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and the
//      optional AWS_SESSION_TOKEN;
//   2. the shared credentials file (AWS_SHARED_CREDENTIALS_FILE, else
//      $HOME/.aws/credentials), section AWS_PROFILE (default "default");
//   3. the EC2 instance metadata service, IMDSv2 (a session token by
//      PUT /latest/api/token, then the role name and its credentials from
//      /latest/meta-data/iam/security-credentials/), at
//      AWS_EC2_METADATA_SERVICE_ENDPOINT (default http://169.254.169.254);
//      skipped when AWS_EC2_METADATA_DISABLED is "true".
// The environment is passed in as a map, never read from the process here,
// so tests do not have to mutate the process's environment.
//
// Credentials with an expiration (those from the metadata service) are
// fetched again `refresh_before_expiry` before they expire; if that refresh
// fails, the old ones are used until they really expire. When the whole
// chain fails, Get() fails fast for `retry_after_failure` instead of asking
// the metadata service on every call (a host without one would otherwise
// pay the connect deadline per request).
//
// Errors are tagged with a RemoteErrorCause (remote_error.h): kAccessDenied
// for missing or malformed credentials (the message says which variable,
// file line or profile), the transport's cause for an unreachable metadata
// service.
//
// Thread-safe; a refresh holds the lock, so concurrent callers wait for it.
#ifndef NEFFD_DAEMON_S3_CREDENTIALS_H_
#define NEFFD_DAEMON_S3_CREDENTIALS_H_

#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/s3/http_client.h"
#include "store/env.h"

namespace neffd::remote {

using Environment = absl::flat_hash_map<std::string, std::string>;

// The calling process's environment.
Environment ProcessEnvironment();

struct AwsCredentials {
  std::string access_key_id;
  std::string secret_access_key;
  std::string session_token;  // empty for long-term keys
  // Unset for credentials that do not expire (environment, file).
  std::optional<absl::Time> expiration;
  // Where they came from, for logs: "environment", "credentials file PATH
  // [PROFILE]", "instance metadata role ROLE".
  std::string source;
};

struct CredentialsOptions {
  Environment env;
  HttpDeadlines metadata_deadlines{absl::Seconds(1), absl::Seconds(3)};
  absl::Duration refresh_before_expiry = absl::Minutes(5);
  absl::Duration retry_after_failure = absl::Seconds(30);
  Env* clock = Env::Default();  // (`env` is the process environment)
};

class CredentialsProvider {
 public:
  explicit CredentialsProvider(CredentialsOptions options);

  // Current credentials, resolving or refreshing them when needed.
  absl::StatusOr<AwsCredentials> Get();

 private:
  absl::StatusOr<AwsCredentials> Resolve();
  absl::StatusOr<AwsCredentials> FromMetadataService();

  const CredentialsOptions options_;
  HttpClient metadata_http_;
  absl::Mutex mu_;
  std::optional<AwsCredentials> cached_ ABSL_GUARDED_BY(mu_);
  absl::Status last_failure_ ABSL_GUARDED_BY(mu_);
  absl::Time retry_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace neffd::remote

#endif  // NEFFD_DAEMON_S3_CREDENTIALS_H_
