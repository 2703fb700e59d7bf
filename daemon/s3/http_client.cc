#include "daemon/s3/http_client.h"

#include <curl/curl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/base/call_once.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "daemon/s3/remote_error.h"

namespace neffd::remote {
namespace {

// Larger than libcurl's 16 KiB defaults: fewer syscalls per MiB moved.
constexpr long kDownloadBufferSize = 512 << 10;
constexpr long kUploadBufferSize = 1 << 20;
constexpr size_t kMaxIdleHandles = 8;

// Everything the libcurl callbacks of one transfer share.
struct Transfer {
  CURL* curl = nullptr;
  const HttpRequest* request = nullptr;
  HttpResponse* response = nullptr;
  uint64_t body_sent = 0;
  // A local failure that made a callback abort the transfer.
  absl::Status local_error;
};

size_t ReadBody(char* buffer, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const HttpRequest& r = *t->request;
  const uint64_t want =
      std::min<uint64_t>(size * count, r.body_length - t->body_sent);
  if (want == 0) return 0;
  ssize_t n;
  do {
    n = pread(r.body_fd, buffer, want, r.body_offset + t->body_sent);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) {
    t->local_error = RemoteError(
        RemoteErrorCause::kOther,
        n == 0 ? "request body file ended before its stated length"
               : absl::StrCat("reading the request body: ", strerror(errno)));
    return CURL_READFUNC_ABORT;
  }
  t->body_sent += n;
  return n;
}

bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= n;
  }
  return true;
}

size_t WriteBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  long status = 0;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &status);
  if (t->request->response_fd >= 0 && status / 100 == 2) {
    if (!WriteAll(t->request->response_fd, data, bytes)) {
      t->local_error =
          RemoteError(RemoteErrorCause::kOther,
                      absl::StrCat("writing the answer: ", strerror(errno)));
      return 0;
    }
    t->response->bytes_written += bytes;
    return bytes;
  }
  if (t->response->body.size() + bytes > kMaxInMemoryBody) {
    t->local_error = RemoteError(
        RemoteErrorCause::kOther,
        absl::StrCat("answer body larger than ", kMaxInMemoryBody, " bytes"));
    return 0;
  }
  t->response->body.append(data, bytes);
  return bytes;
}

size_t ReadHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  absl::string_view line(data, size * count);
  if (absl::StartsWith(line, "HTTP/")) {
    // A new status line ("100 Continue", then the real answer): only the
    // final answer's headers count.
    t->response->headers.clear();
  } else if (size_t colon = line.find(':'); colon != absl::string_view::npos) {
    t->response->headers[absl::AsciiStrToLower(line.substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return size * count;
}

RemoteErrorCause CauseOfCurlError(CURLcode code) {
  switch (code) {
    case CURLE_COULDNT_CONNECT:
    case CURLE_COULDNT_RESOLVE_HOST:
      return RemoteErrorCause::kConnectionRefused;
    case CURLE_OPERATION_TIMEDOUT:
      return RemoteErrorCause::kTimeout;
    case CURLE_GOT_NOTHING:
    case CURLE_RECV_ERROR:
    case CURLE_SEND_ERROR:
    case CURLE_PARTIAL_FILE:
      return RemoteErrorCause::kServerError;
    default:
      return RemoteErrorCause::kOther;
  }
}

void InitCurlOnce() {
  static absl::once_flag once;
  absl::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

}  // namespace

HttpClient::HttpClient(HttpDeadlines deadlines) : deadlines_(deadlines) {
  InitCurlOnce();
}

HttpClient::~HttpClient() {
  absl::MutexLock lock(&mu_);
  for (void* handle : idle_handles_) curl_easy_cleanup(handle);
}

void* HttpClient::AcquireHandle() {
  {
    absl::MutexLock lock(&mu_);
    if (!idle_handles_.empty()) {
      void* handle = idle_handles_.back();
      idle_handles_.pop_back();
      // Forgets the options, keeps the connection cache.
      curl_easy_reset(handle);
      return handle;
    }
  }
  return curl_easy_init();
}

void HttpClient::ReleaseHandle(void* handle) {
  absl::MutexLock lock(&mu_);
  if (idle_handles_.size() < kMaxIdleHandles) {
    idle_handles_.push_back(handle);
  } else {
    curl_easy_cleanup(handle);
  }
}

absl::StatusOr<HttpResponse> HttpClient::Send(const HttpRequest& request) {
  CURL* curl = AcquireHandle();
  if (curl == nullptr) {
    return RemoteError(RemoteErrorCause::kOther, "curl_easy_init failed");
  }
  HttpResponse response;
  Transfer transfer;
  transfer.curl = curl;
  transfer.request = &request;
  transfer.response = &response;
  char error_buffer[CURL_ERROR_SIZE] = "";

  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  // threads: no SIGALRM
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(
      curl, CURLOPT_CONNECTTIMEOUT_MS,
      static_cast<long>(absl::ToInt64Milliseconds(deadlines_.connect)));
  curl_easy_setopt(
      curl, CURLOPT_TIMEOUT_MS,
      static_cast<long>(absl::ToInt64Milliseconds(deadlines_.total)));
  curl_easy_setopt(curl, CURLOPT_BUFFERSIZE, kDownloadBufferSize);
  curl_easy_setopt(curl, CURLOPT_UPLOAD_BUFFERSIZE, kUploadBufferSize);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, ReadHeader);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &transfer);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, WriteBody);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &transfer);

  if (request.method == "HEAD") {
    curl_easy_setopt(curl, CURLOPT_NOBODY, 1L);
  } else if (request.body_fd >= 0) {
    curl_easy_setopt(curl, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(curl, CURLOPT_READFUNCTION, ReadBody);
    curl_easy_setopt(curl, CURLOPT_READDATA, &transfer);
    curl_easy_setopt(curl, CURLOPT_INFILESIZE_LARGE,
                     static_cast<curl_off_t>(request.body_length));
  } else if (request.method == "POST" || request.method == "PUT") {
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
  }
  if (request.method != "GET" && request.method != "HEAD") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  curl_slist* headers = nullptr;
  for (const std::string& header : request.headers) {
    headers = curl_slist_append(headers, header.c_str());
  }
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  std::string userpwd;
  if (request.sign.has_value()) {
    userpwd = absl::StrCat(request.sign->access_key_id, ":",
                           request.sign->secret_access_key);
    curl_easy_setopt(curl, CURLOPT_AWS_SIGV4, request.sign->provider.c_str());
    curl_easy_setopt(curl, CURLOPT_USERPWD, userpwd.c_str());
  }

  CURLcode code = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(headers);
  absl::Status failure = transfer.local_error;
  if (failure.ok() && code != CURLE_OK) {
    failure = RemoteError(
        CauseOfCurlError(code),
        error_buffer[0] != '\0' ? error_buffer : curl_easy_strerror(code));
  }
  // The idle handle must not keep pointing into this stack frame.
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, nullptr);
  ReleaseHandle(curl);
  if (!failure.ok()) return failure;
  response.status = static_cast<int>(status);
  return response;
}

}  // namespace neffd::remote
