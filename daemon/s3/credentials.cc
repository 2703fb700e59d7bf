#include "daemon/s3/credentials.h"

#include <ini.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "daemon/s3/remote_error.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

extern char** environ;

namespace neffd::remote {
namespace {

constexpr char kDefaultMetadataEndpoint[] = "http://169.254.169.254";
constexpr char kRolesPath[] = "/latest/meta-data/iam/security-credentials/";

std::string EnvOr(const Environment& env, const std::string& name,
                  std::string fallback = "") {
  auto it = env.find(name);
  return it != env.end() && !it->second.empty() ? it->second : fallback;
}

absl::Status NoCredentials(absl::string_view message) {
  return RemoteError(RemoteErrorCause::kAccessDenied, message);
}

absl::StatusOr<std::optional<AwsCredentials>> FromEnvironment(
    const Environment& env) {
  std::string id = EnvOr(env, "AWS_ACCESS_KEY_ID");
  std::string secret = EnvOr(env, "AWS_SECRET_ACCESS_KEY");
  if (id.empty() && secret.empty()) return std::nullopt;
  if (id.empty() || secret.empty()) {
    return NoCredentials(absl::StrCat(
        id.empty() ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
        " is not set but ",
        id.empty() ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID", " is"));
  }
  return AwsCredentials{id, secret, EnvOr(env, "AWS_SESSION_TOKEN"),
                        std::nullopt, "environment"};
}

struct ProfileReader {
  std::string profile;
  bool found = false;
  AwsCredentials credentials;
};

int OnIniEntry(void* user, const char* section, const char* name,
               const char* value) {
  auto* reader = static_cast<ProfileReader*>(user);
  if (reader->profile != section) return 1;
  reader->found = true;
  absl::string_view key(name);
  if (key == "aws_access_key_id") {
    reader->credentials.access_key_id = value;
  } else if (key == "aws_secret_access_key") {
    reader->credentials.secret_access_key = value;
  } else if (key == "aws_session_token") {
    reader->credentials.session_token = value;
  }
  return 1;
}

// nullopt when there is no file, or no such profile and none was asked for.
absl::StatusOr<std::optional<AwsCredentials>> FromCredentialsFile(
    const Environment& env) {
  const std::string path = EnvOr(
      env, "AWS_SHARED_CREDENTIALS_FILE",
      absl::StrCat(EnvOr(env, "HOME", "/nonexistent"), "/.aws/credentials"));
  const bool profile_asked = !EnvOr(env, "AWS_PROFILE").empty();
  ProfileReader reader;
  reader.profile = EnvOr(env, "AWS_PROFILE", "default");
  if (access(path.c_str(), F_OK) != 0) return std::nullopt;
  int rc = ini_parse(path.c_str(), OnIniEntry, &reader);
  if (rc < 0) {
    return NoCredentials(absl::StrCat("cannot read ", path));
  }
  if (rc > 0) {
    return NoCredentials(absl::StrCat(path, " line ", rc, ": not an INI line"));
  }
  if (!reader.found) {
    if (!profile_asked) return std::nullopt;
    return NoCredentials(absl::StrCat("AWS_PROFILE=", reader.profile, ": no [",
                                      reader.profile, "] section in ", path));
  }
  AwsCredentials& c = reader.credentials;
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    return NoCredentials(absl::StrCat(
        path, " [", reader.profile, "]: ",
        c.access_key_id.empty() ? "aws_access_key_id" : "aws_secret_access_key",
        " is missing"));
  }
  c.source = absl::StrCat("credentials file ", path, " [", reader.profile, "]");
  return std::move(c);
}

// The body of a 200 answer, else an error naming `what`.
absl::StatusOr<std::string> MetadataGet(HttpClient& http,
                                        const HttpRequest& request,
                                        absl::string_view what) {
  absl::StatusOr<HttpResponse> response = http.Send(request);
  if (!response.ok()) {
    return RemoteError(RemoteErrorCauseOf(response.status()),
                       absl::StrCat("instance metadata ", what, ": ",
                                    response.status().message()));
  }
  if (response->status != 200) {
    return RemoteError(
        CauseOfHttpStatus(response->status),
        absl::StrCat("instance metadata ", what, ": HTTP ", response->status));
  }
  return std::move(response->body);
}

absl::StatusOr<AwsCredentials> ParseRoleCredentials(absl::string_view json,
                                                    absl::string_view role) {
  google::protobuf::Struct document;
  auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &document);
  if (!parsed.ok()) {
    return NoCredentials(absl::StrCat("instance metadata role ", role,
                                      ": not JSON: ", parsed.ToString()));
  }
  auto field = [&](const char* name) -> std::string {
    auto it = document.fields().find(name);
    return it != document.fields().end() ? it->second.string_value() : "";
  };
  if (std::string code = field("Code"); code != "Success") {
    return NoCredentials(absl::StrCat("instance metadata role ", role,
                                      ": Code is '", code, "'"));
  }
  AwsCredentials c{field("AccessKeyId"), field("SecretAccessKey"),
                   field("Token"), std::nullopt,
                   absl::StrCat("instance metadata role ", role)};
  absl::Time expiration;
  std::string error;
  if (!absl::ParseTime(absl::RFC3339_full, field("Expiration"), &expiration,
                       &error)) {
    return NoCredentials(
        absl::StrCat("instance metadata role ", role, ": Expiration: ", error));
  }
  c.expiration = expiration;
  if (c.access_key_id.empty() || c.secret_access_key.empty()) {
    return NoCredentials(absl::StrCat("instance metadata role ", role,
                                      ": AccessKeyId or SecretAccessKey "
                                      "missing"));
  }
  return c;
}

}  // namespace

Environment ProcessEnvironment() {
  Environment env;
  for (char** e = environ; *e != nullptr; ++e) {
    std::pair<std::string, std::string> entry =
        absl::StrSplit(*e, absl::MaxSplits('=', 1));
    env.insert(std::move(entry));
  }
  return env;
}

CredentialsProvider::CredentialsProvider(CredentialsOptions options)
    : options_(std::move(options)),
      metadata_http_(options_.metadata_deadlines) {}

absl::StatusOr<AwsCredentials> CredentialsProvider::Get() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = options_.clock->Now();
  if (cached_.has_value() &&
      (!cached_->expiration.has_value() ||
       now < *cached_->expiration - options_.refresh_before_expiry)) {
    return *cached_;
  }
  if (!cached_.has_value() && now < retry_at_) return last_failure_;
  absl::StatusOr<AwsCredentials> resolved = Resolve();
  if (resolved.ok()) {
    cached_ = *resolved;
    return resolved;
  }
  if (cached_.has_value() && now < *cached_->expiration) return *cached_;
  cached_.reset();
  last_failure_ = resolved.status();
  retry_at_ = now + options_.retry_after_failure;
  return resolved;
}

absl::StatusOr<AwsCredentials> CredentialsProvider::Resolve() {
  for (auto source : {FromEnvironment, FromCredentialsFile}) {
    absl::StatusOr<std::optional<AwsCredentials>> found = source(options_.env);
    if (!found.ok()) return found.status();
    if (found->has_value()) return **found;
  }
  if (absl::AsciiStrToLower(EnvOr(options_.env, "AWS_EC2_METADATA_DISABLED")) ==
      "true") {
    return NoCredentials(
        "no AWS credentials: none in the environment or the shared "
        "credentials file, and AWS_EC2_METADATA_DISABLED=true");
  }
  return FromMetadataService();
}

absl::StatusOr<AwsCredentials> CredentialsProvider::FromMetadataService() {
  const std::string endpoint(
      absl::StripSuffix(EnvOr(options_.env, "AWS_EC2_METADATA_SERVICE_ENDPOINT",
                              kDefaultMetadataEndpoint),
                        "/"));
  HttpRequest token_request;
  token_request.method = "PUT";
  token_request.url = endpoint + "/latest/api/token";
  token_request.headers = {"X-aws-ec2-metadata-token-ttl-seconds: 21600"};
  absl::StatusOr<std::string> token =
      MetadataGet(metadata_http_, token_request, "token");
  if (!token.ok()) return token.status();

  HttpRequest roles_request;
  roles_request.url = endpoint + kRolesPath;
  roles_request.headers = {absl::StrCat("X-aws-ec2-metadata-token: ", *token)};
  absl::StatusOr<std::string> roles =
      MetadataGet(metadata_http_, roles_request, "role");
  if (!roles.ok()) return roles.status();
  // One role per instance profile: the first line.
  std::string role(absl::StripAsciiWhitespace(
      std::pair<absl::string_view, absl::string_view>(
          absl::StrSplit(*roles, absl::MaxSplits('\n', 1)))
          .first));
  if (role.empty()) {
    return NoCredentials("instance metadata: no IAM role attached");
  }

  HttpRequest credentials_request = roles_request;
  credentials_request.url = absl::StrCat(endpoint, kRolesPath, role);
  absl::StatusOr<std::string> json = MetadataGet(
      metadata_http_, credentials_request, absl::StrCat("role ", role));
  if (!json.ok()) return json.status();
  return ParseRoleCredentials(*json, role);
}

}  // namespace neffd::remote
