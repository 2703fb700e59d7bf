#include "daemon/s3/s3_client.h"

#include <curl/curl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "store/digest.h"

namespace neffd::remote {

// One S3 request being built and sent.
struct S3Client::Call {
  Call(std::string method, absl::string_view key,
       std::map<std::string, std::string> query = {})
      : method(std::move(method)), key(key), query(std::move(query)) {}

  std::string method;
  std::string key;                           // empty: the bucket itself
  std::map<std::string, std::string> query;  // sorted, as SigV4 wants
  HttpRequest request;
};

namespace {

constexpr char kUnsignedPayload[] = "UNSIGNED-PAYLOAD";

// RFC 3986 percent-encoding of everything but unreserved characters, as
// SigV4's canonical form has it.
std::string UriEncode(absl::string_view text) {
  char* escaped =
      curl_easy_escape(nullptr, text.data(), static_cast<int>(text.size()));
  std::string result(escaped != nullptr ? escaped : "");
  curl_free(escaped);
  return result;
}

std::string EncodeKeyPath(absl::string_view key) {
  std::vector<std::string> segments;
  for (absl::string_view segment : absl::StrSplit(key, '/')) {
    segments.push_back(UriEncode(segment));
  }
  return absl::StrJoin(segments, "/");
}

std::string EncodeQuery(const std::map<std::string, std::string>& query) {
  std::vector<std::string> pairs;
  for (const auto& [name, value] : query) {
    // Valueless parameters ("?uploads") are signed as "uploads=".
    pairs.push_back(absl::StrCat(UriEncode(name), "=", UriEncode(value)));
  }
  return absl::StrJoin(pairs, "&");
}

absl::StatusOr<std::string> Sha256OfRegion(int fd, uint64_t offset,
                                           uint64_t length) {
  Sha256 hash;
  std::vector<char> buffer(1 << 20);
  for (uint64_t done = 0; done < length;) {
    ssize_t n =
        pread(fd, buffer.data(),
              std::min<uint64_t>(buffer.size(), length - done), offset + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return RemoteError(RemoteErrorCause::kOther,
                         n == 0 ? "upload source ended before its stated length"
                                : absl::StrCat("reading the upload source: ",
                                               strerror(errno)));
    }
    hash.Update(buffer.data(), n);
    done += n;
  }
  return hash.HexDigest();
}

RemoteErrorCause CauseOfS3Code(absl::string_view code, int http_status) {
  static const auto* const kCauses =
      new absl::flat_hash_map<absl::string_view, RemoteErrorCause>{
          {"NoSuchKey", RemoteErrorCause::kNotFound},
          {"NoSuchUpload", RemoteErrorCause::kNotFound},
          {"NoSuchBucket", RemoteErrorCause::kNotFound},
          {"AccessDenied", RemoteErrorCause::kAccessDenied},
          {"InvalidAccessKeyId", RemoteErrorCause::kAccessDenied},
          {"SignatureDoesNotMatch", RemoteErrorCause::kAccessDenied},
          {"ExpiredToken", RemoteErrorCause::kAccessDenied},
          {"InvalidToken", RemoteErrorCause::kAccessDenied},
          {"SlowDown", RemoteErrorCause::kThrottled},
          {"RequestTimeout", RemoteErrorCause::kTimeout},
          {"InternalError", RemoteErrorCause::kServerError},
          {"ServiceUnavailable", RemoteErrorCause::kServerError},
      };
  auto it = kCauses->find(code);
  return it != kCauses->end() ? it->second : CauseOfHttpStatus(http_status);
}

absl::Status ValidateOptions(const S3ClientOptions& o) {
  if (!o.endpoint.empty() && !absl::StartsWith(o.endpoint, "http://") &&
      !absl::StartsWith(o.endpoint, "https://")) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3ClientOptions.endpoint: '", o.endpoint,
                     "' is not an http:// or https:// URL"));
  }
  if (o.region.empty() ||
      !std::all_of(o.region.begin(), o.region.end(), [](char c) {
        return absl::ascii_islower(c) || absl::ascii_isdigit(c) || c == '-';
      })) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3ClientOptions.region: '", o.region,
                     "' is not a region name like us-east-1"));
  }
  if (o.bucket.empty() || absl::StrContains(o.bucket, '/')) {
    return absl::InvalidArgumentError(absl::StrCat(
        "S3ClientOptions.bucket: '", o.bucket, "' is not a bucket name"));
  }
  if (o.part_size < kMinPartSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("S3ClientOptions.part_size: ", o.part_size,
                     " is below S3's minimum part size of ", kMinPartSize));
  }
  if (o.upload_concurrency < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "S3ClientOptions.upload_concurrency: ", o.upload_concurrency,
        " is not a positive count"));
  }
  if (o.deadlines.connect <= absl::ZeroDuration() ||
      o.deadlines.total <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        "S3ClientOptions.deadlines: connect and total must be positive");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<S3Client>> S3Client::Create(
    S3ClientOptions options, CredentialsProvider* credentials) {
  if (absl::Status valid = ValidateOptions(options); !valid.ok()) return valid;
  if (options.endpoint.empty()) {
    options.endpoint =
        absl::StrCat("https://s3.", options.region, ".amazonaws.com");
  }
  options.endpoint = std::string(absl::StripSuffix(options.endpoint, "/"));
  return std::unique_ptr<S3Client>(
      new S3Client(std::move(options), credentials));
}

S3Client::S3Client(S3ClientOptions options, CredentialsProvider* credentials)
    : options_(std::move(options)),
      credentials_(credentials),
      http_(options_.deadlines) {}

absl::Status S3Client::Fail(const Call& call, absl::Status status) {
  RemoteErrorCause cause = RemoteErrorCauseOf(status);
  errors_[static_cast<int>(cause)].fetch_add(1, std::memory_order_relaxed);
  return RemoteError(
      cause, absl::StrCat("S3 ", call.method, " s3://", options_.bucket, "/",
                          call.key, ": ", status.message()));
}

absl::StatusOr<HttpResponse> S3Client::Execute(Call& call) {
  requests_.fetch_add(1, std::memory_order_relaxed);
  absl::StatusOr<AwsCredentials> credentials = credentials_->Get();
  if (!credentials.ok()) return Fail(call, credentials.status());

  HttpRequest& request = call.request;
  request.method = call.method;
  request.url = absl::StrCat(options_.endpoint, "/", options_.bucket);
  if (!call.key.empty())
    absl::StrAppend(&request.url, "/", EncodeKeyPath(call.key));
  if (!call.query.empty())
    absl::StrAppend(&request.url, "?", EncodeQuery(call.query));

  std::string payload_hash;
  if (request.body_fd < 0) {
    payload_hash = Sha256Hex(request.body);
  } else if (!options_.sign_payload) {
    payload_hash = kUnsignedPayload;
  } else {
    absl::StatusOr<std::string> hash = Sha256OfRegion(
        request.body_fd, request.body_offset, request.body_length);
    if (!hash.ok()) return Fail(call, hash.status());
    payload_hash = *std::move(hash);
  }
  request.headers.push_back(
      absl::StrCat("x-amz-content-sha256: ", payload_hash));
  if (!credentials->session_token.empty()) {
    request.headers.push_back(
        absl::StrCat("x-amz-security-token: ", credentials->session_token));
  }
  request.sign =
      SigV4Signer{absl::StrCat("aws:amz:", options_.region, ":s3"),
                  credentials->access_key_id, credentials->secret_access_key};

  absl::StatusOr<HttpResponse> response = http_.Send(request);
  if (!response.ok()) return Fail(call, response.status());
  bytes_downloaded_.fetch_add(response->bytes_written + response->body.size(),
                              std::memory_order_relaxed);
  if (response->status / 100 == 2) {
    bytes_uploaded_.fetch_add(
        request.body_fd >= 0 ? request.body_length : request.body.size(),
        std::memory_order_relaxed);
    return response;
  }
  std::string detail = absl::StrCat("HTTP ", response->status);
  RemoteErrorCause cause = CauseOfHttpStatus(response->status);
  if (absl::StatusOr<S3ErrorDocument> error = ParseS3Error(response->body);
      error.ok()) {
    absl::StrAppend(&detail, " ", error->code, ": ", error->message);
    cause = CauseOfS3Code(error->code, response->status);
  }
  return Fail(call, RemoteError(cause, detail));
}

absl::StatusOr<ObjectInfo> S3Client::HeadObject(absl::string_view key) {
  Call call("HEAD", key);
  absl::StatusOr<HttpResponse> response = Execute(call);
  if (!response.ok()) return response.status();
  ObjectInfo info;
  info.etag = response->headers["etag"];
  if (!absl::SimpleAtoi(response->headers["content-length"], &info.size)) {
    return Fail(call, RemoteError(RemoteErrorCause::kOther,
                                  "answer has no numeric Content-Length"));
  }
  return info;
}

absl::StatusOr<uint64_t> S3Client::GetObject(absl::string_view key, int fd) {
  Call call("GET", key);
  call.request.response_fd = fd;
  absl::StatusOr<HttpResponse> response = Execute(call);
  if (!response.ok()) return response.status();
  return response->bytes_written;
}

absl::Status S3Client::PutObject(absl::string_view key, int fd, uint64_t offset,
                                 uint64_t length) {
  Call call("PUT", key);
  call.request.body_fd = fd;
  call.request.body_offset = offset;
  call.request.body_length = length;
  return Execute(call).status();
}

absl::StatusOr<std::string> S3Client::CreateMultipartUpload(
    absl::string_view key) {
  Call call("POST", key, {{"uploads", ""}});
  absl::StatusOr<HttpResponse> response = Execute(call);
  if (!response.ok()) return response.status();
  absl::StatusOr<std::string> upload_id = ParseUploadId(response->body);
  if (!upload_id.ok()) {
    return Fail(call, RemoteError(RemoteErrorCause::kOther,
                                  upload_id.status().message()));
  }
  return upload_id;
}

absl::StatusOr<CompletedPart> S3Client::UploadPart(absl::string_view key,
                                                   absl::string_view upload_id,
                                                   int part_number, int fd,
                                                   uint64_t offset,
                                                   uint64_t length) {
  Call call("PUT", key,
            {{"partNumber", absl::StrCat(part_number)},
             {"uploadId", std::string(upload_id)}});
  call.request.body_fd = fd;
  call.request.body_offset = offset;
  call.request.body_length = length;
  absl::StatusOr<HttpResponse> response = Execute(call);
  if (!response.ok()) return response.status();
  CompletedPart part{part_number, response->headers["etag"]};
  if (part.etag.empty()) {
    return Fail(call, RemoteError(RemoteErrorCause::kOther,
                                  "UploadPart answer has no ETag"));
  }
  return part;
}

absl::Status S3Client::CompleteMultipartUpload(
    absl::string_view key, absl::string_view upload_id,
    const std::vector<CompletedPart>& parts) {
  Call call("POST", key, {{"uploadId", std::string(upload_id)}});
  call.request.body = CompleteMultipartUploadXml(parts);
  absl::StatusOr<HttpResponse> response = Execute(call);
  if (!response.ok()) return response.status();
  // S3 can fail a completion after answering 200: the body says so.
  if (absl::StatusOr<S3ErrorDocument> error = ParseS3Error(response->body);
      error.ok()) {
    return Fail(call, RemoteError(CauseOfS3Code(error->code, 500),
                                  absl::StrCat("HTTP 200 ", error->code, ": ",
                                               error->message)));
  }
  return absl::OkStatus();
}

absl::Status S3Client::AbortMultipartUpload(absl::string_view key,
                                            absl::string_view upload_id) {
  Call call("DELETE", key, {{"uploadId", std::string(upload_id)}});
  return Execute(call).status();
}

absl::Status S3Client::UploadFile(absl::string_view key, int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0) {
    return RemoteError(
        RemoteErrorCause::kOther,
        absl::StrCat("upload of ", key, ": fstat: ", strerror(errno)));
  }
  const uint64_t size = st.st_size;
  if (size < options_.multipart_threshold) return PutObject(key, fd, 0, size);

  absl::StatusOr<std::string> upload_id = CreateMultipartUpload(key);
  if (!upload_id.ok()) return upload_id.status();
  absl::StatusOr<std::vector<CompletedPart>> parts =
      UploadParts(key, *upload_id, fd, size);
  absl::Status status = parts.status();
  if (status.ok()) status = CompleteMultipartUpload(key, *upload_id, *parts);
  // Best effort: S3 keeps an unfinished upload's parts (and bills them) until
  // it is aborted; the first error is the one worth reporting.
  if (!status.ok()) AbortMultipartUpload(key, *upload_id).IgnoreError();
  return status;
}

absl::StatusOr<std::vector<CompletedPart>> S3Client::UploadParts(
    absl::string_view key, absl::string_view upload_id, int fd, uint64_t size) {
  const uint64_t part_size =
      std::max(options_.part_size, (size + kMaxParts - 1) / kMaxParts);
  const uint64_t part_count = (size + part_size - 1) / part_size;
  std::vector<CompletedPart> parts(part_count);
  absl::Mutex mu;
  uint64_t next_part = 0;    // guarded by mu
  absl::Status first_error;  // guarded by mu
  auto send_parts = [&] {
    for (;;) {
      uint64_t index;
      {
        absl::MutexLock lock(&mu);
        if (!first_error.ok() || next_part == part_count) return;
        index = next_part++;
      }
      const uint64_t offset = index * part_size;
      absl::StatusOr<CompletedPart> part =
          UploadPart(key, upload_id, static_cast<int>(index) + 1, fd, offset,
                     std::min(part_size, size - offset));
      if (part.ok()) {
        parts[index] = *std::move(part);
        continue;
      }
      absl::MutexLock lock(&mu);
      if (first_error.ok()) first_error = part.status();
      return;
    }
  };
  std::vector<EnvThread> senders;
  const uint64_t helpers =
      std::min<uint64_t>(options_.upload_concurrency, part_count) - 1;
  for (uint64_t i = 0; i < helpers; ++i) {
    senders.push_back(options_.env->StartThread("neffd-s3-part", send_parts));
  }
  send_parts();
  for (EnvThread& sender : senders) sender.Join();
  if (!first_error.ok()) return first_error;
  return parts;
}

absl::StatusOr<ListObjectsPage> S3Client::ListObjectsV2(
    absl::string_view prefix, absl::string_view continuation_token,
    int max_keys) {
  Call call("GET", "",
            {{"list-type", "2"},
             {"max-keys", absl::StrCat(max_keys)},
             {"prefix", std::string(prefix)}});
  if (!continuation_token.empty()) {
    call.query["continuation-token"] = std::string(continuation_token);
  }
  absl::StatusOr<HttpResponse> response = Execute(call);
  if (!response.ok()) return response.status();
  absl::StatusOr<ListObjectsPage> page = ParseListObjectsV2(response->body);
  if (!page.ok()) {
    return Fail(call,
                RemoteError(RemoteErrorCause::kOther, page.status().message()));
  }
  return page;
}

absl::Status S3Client::DeleteObject(absl::string_view key) {
  Call call("DELETE", key);
  return Execute(call).status();
}

S3ClientCounters S3Client::counters() const {
  S3ClientCounters c;
  c.requests = requests_.load(std::memory_order_relaxed);
  c.bytes_downloaded = bytes_downloaded_.load(std::memory_order_relaxed);
  c.bytes_uploaded = bytes_uploaded_.load(std::memory_order_relaxed);
  for (int i = 0; i < kRemoteErrorCauseCount; ++i) {
    c.errors[i] = errors_[i].load(std::memory_order_relaxed);
  }
  return c;
}

}  // namespace neffd::remote
