#include "tests/harness/servers.h"

#include <signal.h>
#include <unistd.h>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace neffd::test_support {
namespace {

constexpr char kListening[] = "listening ";

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

}  // namespace

absl::StatusOr<std::unique_ptr<LoopbackServer>> LoopbackServer::Start(
    std::vector<std::string> argv) {
  auto process = std::make_unique<Process>(std::move(argv));
  const absl::Time deadline = absl::Now() + absl::Seconds(60);
  while (absl::Now() < deadline) {
    std::vector<std::string> lines = Lines(process->Stdout());
    int port = 0;
    if (!lines.empty() && absl::StartsWith(lines[0], kListening) &&
        absl::SimpleAtoi(lines[0].substr(strlen(kListening)), &port)) {
      return std::unique_ptr<LoopbackServer>(
          new LoopbackServer(std::move(process), port));
    }
    if (!process->Running()) {
      return absl::InternalError(absl::StrCat(
          "server exited with ", process->Wait(), ": ", process->Stderr()));
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("server not listening after 60 s: ", process->Stderr()));
}

std::string LoopbackServer::url() const {
  return absl::StrCat("http://127.0.0.1:", port_);
}

std::vector<std::string> LoopbackServer::RequestLog() const {
  std::vector<std::string> lines = Lines(process_->Stdout());
  if (!lines.empty()) lines.erase(lines.begin());
  return lines;
}

void LoopbackServer::Kill() {
  process_->Signal(SIGKILL);
  process_->Wait();
}

absl::StatusOr<std::unique_ptr<LoopbackServer>> StartS3Server(
    const std::string& data_dir, const std::string& bucket, int port) {
  for (const char* package : {"s3rver", "aws4"}) {
    const std::string path =
        absl::StrCat(kS3TestPrefix, "/node_modules/", package, "/package.json");
    if (access(path.c_str(), R_OK) != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "the S3 test server needs npm package ", package, " in ",
          kS3TestPrefix, "/node_modules: run deploy/install-deps.sh"));
    }
  }
  if (access("/usr/bin/node", X_OK) != 0) {
    return absl::FailedPreconditionError(
        "the S3 test server needs /usr/bin/node: run deploy/install-deps.sh");
  }
  // s3rver makes ListObjectsV2 continuation tokens with DES, which Node's
  // OpenSSL 3 offers only from its legacy provider.
  return LoopbackServer::Start({"/usr/bin/node", "--openssl-legacy-provider",
                                Runfile("tests/harness/s3_server.js"), data_dir,
                                bucket, absl::StrCat(port)});
}

absl::StatusOr<std::unique_ptr<LoopbackServer>> StartImdsServer(
    const std::string& access_key_id, const std::string& secret_access_key,
    const std::string& role, int lifetime_seconds) {
  return LoopbackServer::Start(
      {"/usr/bin/python3", Runfile("tests/harness/imds_server.py"),
       access_key_id, secret_access_key, role, absl::StrCat(lifetime_seconds)});
}

}  // namespace neffd::test_support
