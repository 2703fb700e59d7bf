// daemon/s3/http_client.h
//
// HttpClient sends one HTTP request with libcurl and returns the answer, with
// the two deadlines every remote call has (connect, total). It is the only
// code in neffd that talks HTTP; the S3 client and the EC2 metadata
// credentials provider are built on it.
//
// Bodies are streamed: a request body can come from a region of a file
// descriptor (read with pread, never loaded whole) and a successful (2xx)
// answer's body can go straight into a file descriptor, so memory use does
// not depend on object size. Error answers and small bodies are kept in
// memory, capped at kMaxInMemoryBody.
//
// Requests may be signed with AWS SigV4 by libcurl itself
// (CURLOPT_AWS_SIGV4): libcurl signs every header in `headers`, so a header
// given here must really be sent (an empty "Expect:" would be signed but not
// sent, which S3 rejects).
//
// Send() fails only when no complete answer arrived; the status (libcurl's
// message, without the URL) is tagged
// with a RemoteErrorCause (remote_error.h): kConnectionRefused, kTimeout,
// kServerError (connection dropped), kOther. Any HTTP status, 4xx and 5xx
// included, is a successful Send() and is the caller's to judge.
//
// Thread-safe. Idle libcurl handles (and with them their open connections)
// are kept for reuse.
#ifndef NEFFD_DAEMON_S3_HTTP_CLIENT_H_
#define NEFFD_DAEMON_S3_HTTP_CLIENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace neffd::remote {

inline constexpr uint64_t kMaxInMemoryBody = 16 << 20;

struct HttpDeadlines {
  // Until the TCP connection is up.
  absl::Duration connect = absl::Seconds(2);
  // For the whole exchange, connect included.
  absl::Duration total = absl::Seconds(60);
};

// What libcurl needs to sign a request with SigV4.
struct SigV4Signer {
  // CURLOPT_AWS_SIGV4's "provider1:provider2:region:service", e.g.
  // "aws:amz:us-east-1:s3".
  std::string provider;
  std::string access_key_id;
  std::string secret_access_key;
};

struct HttpRequest {
  std::string method = "GET";  // GET, HEAD, PUT, POST, DELETE
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  // The request body: `body`, unless body_fd >= 0, in which case
  // [body_offset, body_offset + body_length) of body_fd.
  std::string body;
  int body_fd = -1;
  uint64_t body_offset = 0;
  uint64_t body_length = 0;
  // When >= 0, a 2xx answer's body is written to response_fd from its
  // current offset instead of into HttpResponse::body.
  int response_fd = -1;
  std::optional<SigV4Signer> sign;
};

struct HttpResponse {
  int status = 0;
  // Of the final answer (not of a "100 Continue"); names lowercased.
  absl::flat_hash_map<std::string, std::string> headers;
  std::string body;
  // Bytes written to HttpRequest::response_fd.
  uint64_t bytes_written = 0;
};

class HttpClient {
 public:
  explicit HttpClient(HttpDeadlines deadlines);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  absl::StatusOr<HttpResponse> Send(const HttpRequest& request);

  const HttpDeadlines& deadlines() const { return deadlines_; }

 private:
  void* AcquireHandle();
  void ReleaseHandle(void* handle);

  const HttpDeadlines deadlines_;
  absl::Mutex mu_;
  std::vector<void*> idle_handles_ ABSL_GUARDED_BY(mu_);
};

}  // namespace neffd::remote

#endif  // NEFFD_DAEMON_S3_HTTP_CLIENT_H_
