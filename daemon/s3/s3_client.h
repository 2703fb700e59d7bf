// daemon/s3/s3_client.h
//
// S3Client speaks S3's REST API to one bucket: HeadObject, GetObject,
// PutObject, multipart upload (create, upload part, complete, abort),
// ListObjectsV2 and DeleteObject, path-style
// ({endpoint}/{bucket}/{key}), so any S3-compatible store works.
//
// Requests are signed by libcurl (CURLOPT_AWS_SIGV4) with credentials from a
// CredentialsProvider, asked on every call so refreshed ones are picked up.
// Every request carries x-amz-content-sha256 (S3 and s3rver require it):
// the body's SHA-256, which also lets S3 reject a body damaged in transit,
// or UNSIGNED-PAYLOAD when `sign_payload` is off (it saves reading each body
// twice). Query strings are built sorted and fully encoded, because
// libcurl 7.88 signs the query exactly as given.
//
// Bodies are streamed: GetObject writes into a file descriptor and uploads
// read a region of one, so memory use does not depend on object size.
//
// Every call has the connect and total deadlines of `deadlines` (the total
// one bounds each request, so it must cover the largest single GET, or one
// part of an upload). A failed call returns a status tagged with its
// RemoteErrorCause (remote_error.h), mapped from S3's error code where there
// is one (NoSuchKey -> kNotFound, SignatureDoesNotMatch and
// InvalidAccessKeyId -> kAccessDenied, SlowDown -> kThrottled), else from the
// HTTP status or the transport failure. Messages read
// "S3 GET s3://BUCKET/KEY: HTTP 403 InvalidAccessKeyId: <S3's message>".
//
// Thread-safe.
#ifndef NEFFD_DAEMON_S3_S3_CLIENT_H_
#define NEFFD_DAEMON_S3_S3_CLIENT_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "daemon/s3/credentials.h"
#include "daemon/s3/http_client.h"
#include "daemon/s3/remote_error.h"
#include "daemon/s3/s3_xml.h"
#include "store/env.h"

namespace neffd::remote {

// S3's smallest part (except the last), and most parts in one upload.
inline constexpr uint64_t kMinPartSize = 5 << 20;
inline constexpr uint64_t kMaxParts = 10000;

struct S3ClientOptions {
  // "http://127.0.0.1:4568" for an S3-compatible store; empty means AWS's
  // regional endpoint, https://s3.{region}.amazonaws.com.
  std::string endpoint;
  std::string region = "us-east-1";
  std::string bucket;
  HttpDeadlines deadlines;
  // UploadFile sends files of at least multipart_threshold bytes as a
  // multipart upload in parts of part_size bytes (>= kMinPartSize).
  // A file too big for 10,000 such parts uses bigger ones.
  uint64_t part_size = 16 << 20;
  uint64_t multipart_threshold = 64 << 20;
  // Parts of one upload in flight at once, each on its own connection: S3
  // serves one connection at a fraction of a host's bandwidth, so the AWS
  // CLI and boto3 send 10 at once. Memory use stays independent of the
  // file's size (each part is streamed from the file).
  int upload_concurrency = 4;
  Env* env = Env::Default();  // starts a multipart upload's senders
  bool sign_payload = true;
};

struct ObjectInfo {
  uint64_t size = 0;
  std::string etag;
};

// Totals since construction, for stats.
struct S3ClientCounters {
  uint64_t requests = 0;
  uint64_t bytes_downloaded = 0;
  uint64_t bytes_uploaded = 0;
  std::array<uint64_t, kRemoteErrorCauseCount> errors{};  // by cause
};

class S3Client {
 public:
  // InvalidArgument naming the option (e.g. "S3ClientOptions.part_size")
  // when one is unusable. `credentials` must outlive the client.
  static absl::StatusOr<std::unique_ptr<S3Client>> Create(
      S3ClientOptions options, CredentialsProvider* credentials);

  absl::StatusOr<ObjectInfo> HeadObject(absl::string_view key);
  // Appends the object to `fd` (from its current offset); returns its size.
  // On failure `fd` may hold part of it.
  absl::StatusOr<uint64_t> GetObject(absl::string_view key, int fd);
  // One request with [offset, offset + length) of `fd` as the object.
  absl::Status PutObject(absl::string_view key, int fd, uint64_t offset,
                         uint64_t length);

  absl::StatusOr<std::string> CreateMultipartUpload(absl::string_view key);
  absl::StatusOr<CompletedPart> UploadPart(absl::string_view key,
                                           absl::string_view upload_id,
                                           int part_number, int fd,
                                           uint64_t offset, uint64_t length);
  absl::Status CompleteMultipartUpload(absl::string_view key,
                                       absl::string_view upload_id,
                                       const std::vector<CompletedPart>& parts);
  absl::Status AbortMultipartUpload(absl::string_view key,
                                    absl::string_view upload_id);

  // The whole of `fd` as object `key`: PutObject below multipart_threshold,
  // else a multipart upload with upload_concurrency parts in flight, aborted
  // if any part fails.
  absl::Status UploadFile(absl::string_view key, int fd);

  // One page (up to max_keys objects) of the keys under `prefix`; pass the
  // page's next_continuation_token to get the next one ("" for the first).
  absl::StatusOr<ListObjectsPage> ListObjectsV2(
      absl::string_view prefix, absl::string_view continuation_token,
      int max_keys = 1000);

  // OK also when the object did not exist (S3 answers 204 either way).
  absl::Status DeleteObject(absl::string_view key);

  S3ClientCounters counters() const;
  const S3ClientOptions& options() const { return options_; }

 private:
  struct Call;

  S3Client(S3ClientOptions options, CredentialsProvider* credentials);
  absl::StatusOr<HttpResponse> Execute(Call& call);
  absl::Status Fail(const Call& call, absl::Status status);
  // The parts of [0, size) of `fd`, in order; the first failure.
  absl::StatusOr<std::vector<CompletedPart>> UploadParts(
      absl::string_view key, absl::string_view upload_id, int fd,
      uint64_t size);

  const S3ClientOptions options_;
  CredentialsProvider* const credentials_;
  HttpClient http_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> bytes_downloaded_{0};
  std::atomic<uint64_t> bytes_uploaded_{0};
  std::array<std::atomic<uint64_t>, kRemoteErrorCauseCount> errors_{};
};

}  // namespace neffd::remote

#endif  // NEFFD_DAEMON_S3_S3_CLIENT_H_
