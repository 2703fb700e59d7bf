#include "tests/harness/remote_env.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "daemon/s3/s3_test_util.h"
#include "grpcpp/grpcpp.h"
#include "proto/neffd/v1/records.pb.h"
#include "store/digest.h"
#include "store/done_record.h"
#include "store/layout.h"

namespace neffd::test_support {

std::vector<std::string> RemoteFlags(const LoopbackServer& server) {
  return {absl::StrCat("--remote=s3://", kRemoteBucket, "/", kRemotePrefix),
          "--s3_endpoint=" + server.url(), "--poll_interval=0.2"};
}

std::vector<std::string> S3EnvWithoutKeys() {
  return {"AWS_EC2_METADATA_DISABLED=true",
          "AWS_SHARED_CREDENTIALS_FILE=/nonexistent/credentials",
          "HOME=/nonexistent"};
}

std::vector<std::string> S3Env() {
  std::vector<std::string> env = S3EnvWithoutKeys();
  env.push_back(absl::StrCat("AWS_ACCESS_KEY_ID=", kS3AccessKeyId));
  env.push_back(absl::StrCat("AWS_SECRET_ACCESS_KEY=", kS3SecretAccessKey));
  return env;
}

v1::EntryId NeffId(const std::string& key) {
  v1::EntryId id;
  id.set_namespace_("neff");
  id.set_compiler_version(kCompilerVersion);
  id.set_key(key);
  return id;
}

std::string ObjectName(const std::string& key, const std::string& file) {
  return absl::StrCat(kRemotePrefix, "/",
                      file == "model.neff"
                          ? ArtifactRelPath(Namespace::kNeff, key)
                          : absl::StrCat(RecordsRelDir(key), "/", file));
}

std::string NeffBytes(const std::string& key, size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) {
    bytes[i] = static_cast<char>((i * 131 + key.size() * 7 + key[0]) & 0xff);
  }
  return bytes;
}

absl::Status UploadedAll(const DaemonProcess& daemon,
                         const LoopbackServer& server, uint64_t count) {
  v1::Stats stats;
  if (WaitUntil(
          [&] {
            stats = StatsOf(daemon);
            return stats.remote_uploads() == count && stats.upload_queue() == 0;
          },
          absl::Seconds(60))) {
    return absl::OkStatus();
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "uploads ", stats.remote_uploads(), ", queued ", stats.upload_queue(),
      "; S3 log:\n", absl::StrJoin(server.RequestLog(), "\n")));
}

v1::LockResponse LockKey(const DaemonProcess& daemon, const v1::EntryId& id) {
  v1::LockRequest request;
  *request.mutable_id() = id;
  request.set_wait(true);
  request.set_wait_seconds(60);
  v1::LockResponse response;
  grpc::ClientContext context;
  grpc::Status status = daemon.NewStub()->Lock(&context, request, &response);
  if (!status.ok()) response.set_outcome(v1::LockResponse::OUTCOME_UNSPECIFIED);
  return response;
}

int CountRequests(const LoopbackServer& server, const std::string& method,
                  const std::string& path_suffix) {
  int n = 0;
  for (const std::string& line : server.RequestLog()) {
    std::vector<std::string> parts = absl::StrSplit(line, ' ');
    if (parts.size() == 3 && parts[0] == method && parts[2] == "200" &&
        absl::EndsWith(parts[1].substr(0, parts[1].find('?')), path_suffix)) {
      ++n;
    }
  }
  return n;
}

int CountWrites(const LoopbackServer& server) {
  int n = 0;
  for (const std::string& line : server.RequestLog()) {
    if (absl::StartsWith(line, "PUT ") || absl::StartsWith(line, "POST ") ||
        absl::StartsWith(line, "DELETE ")) {
      ++n;
    }
  }
  return n;
}

S3TestClient::S3TestClient(const LoopbackServer& server)
    : credentials_({remote::TestServerEnvironment()}),
      client_(remote::ClientFor(server, &credentials_)) {}

absl::Status S3TestClient::Put(const std::string& object,
                               const std::string& bytes) {
  const int fd = remote::TempFileWith(bytes);
  absl::Status s = client_->PutObject(object, fd, 0, bytes.size());
  close(fd);
  return s;
}

absl::Status S3TestClient::PutEntry(const std::string& key,
                                    const std::string& bytes) {
  v1::DoneRecord done;
  done.set_size(bytes.size());
  done.set_sha256(Sha256Hex(bytes));
  done.set_compiler_version(kCompilerVersion);
  done.set_key(key);
  done.set_producer_host("another-cluster");
  absl::StatusOr<std::string> json = DoneRecordToJson(done);
  if (!json.ok()) return json.status();
  if (absl::Status s = Put(ObjectName(key, "model.neff"), bytes); !s.ok()) {
    return s;
  }
  return Put(ObjectName(key, "model.done"), *json);
}

absl::StatusOr<std::string> S3TestClient::Get(const std::string& object) {
  const int fd = remote::TempFileWith("");
  absl::StatusOr<uint64_t> size = client_->GetObject(object, fd);
  std::string content = remote::ReadWhole(fd);
  close(fd);
  if (!size.ok()) return size.status();
  return content;
}

}  // namespace neffd::test_support
