#include "tests/faults/wire.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "grpcpp/client_context.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "tests/harness/process.h"

namespace neffd::test_support {

v1::EntryId Id(const std::string& ns, const std::string& version,
               const std::string& key) {
  v1::EntryId id;
  id.set_namespace_(ns);
  id.set_compiler_version(version);
  id.set_key(key);
  return id;
}

v1::LockResponse LockKey(v1::CompileCache::Stub& stub, const std::string& key,
                         int64_t pid, int wait_seconds, grpc::Status* status) {
  v1::LockRequest request;
  *request.mutable_id() = Id("neff", "1.0", key);
  request.mutable_holder()->set_host("test");
  request.mutable_holder()->set_pid(pid);
  request.set_wait(true);
  request.set_wait_seconds(wait_seconds);
  v1::LockResponse response;
  grpc::ClientContext context;
  grpc::Status s = stub.Lock(&context, request, &response);
  if (status != nullptr) *status = s;
  return response;
}

v1::Lease GrantLease(v1::CompileCache::Stub& stub, const std::string& key) {
  grpc::Status status;
  v1::LockResponse response = LockKey(stub, key, getpid(), 30, &status);
  EXPECT_TRUE(status.ok()) << status.error_message();
  EXPECT_EQ(response.outcome(), v1::LockResponse::GRANTED);
  return response.lease();
}

grpc::Status PublishStaged(v1::CompileCache::Stub& stub, const v1::Lease& lease,
                           const std::string& content,
                           const std::string& staged_name) {
  const std::string staged = lease.staging_dir() + "/" + staged_name;
  WriteFile(staged, content);
  v1::PublishRequest request;
  request.set_lease_id(lease.lease_id());
  *request.mutable_id() = lease.id();
  request.set_staged_path(staged);
  request.set_size(content.size());
  request.set_sha256(Sha256Hex(content));
  v1::PublishResponse response;
  grpc::ClientContext context;
  return stub.Publish(&context, request, &response);
}

std::string LookupContent(v1::CompileCache::Stub& stub, const std::string& key,
                          v1::LookupResponse::Result* result) {
  v1::LookupRequest request;
  *request.mutable_id() = Id("neff", "1.0", key);
  v1::LookupResponse response;
  grpc::ClientContext context;
  grpc::Status s = stub.Lookup(&context, request, &response);
  if (result != nullptr) {
    *result =
        s.ok() ? response.result() : v1::LookupResponse::RESULT_UNSPECIFIED;
  }
  if (!s.ok() || response.result() != v1::LookupResponse::HIT) return "";
  return ReadFile(response.entry().path());
}

int CountFds(pid_t pid) {
  DIR* dir = opendir(absl::StrCat("/proc/", pid, "/fd").c_str());
  if (dir == nullptr) return -1;
  int n = 0;
  while (dirent* e = readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(dir);
  return n;
}

long RssKib(pid_t pid) {
  std::ifstream status(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(status, line)) {
    absl::string_view rest = line;
    if (absl::ConsumePrefix(&rest, "VmRSS:")) {
      rest = absl::StripAsciiWhitespace(rest);
      absl::ConsumeSuffix(&rest, " kB");
      long kib = -1;
      return absl::SimpleAtoi(rest, &kib) ? kib : -1;
    }
  }
  return -1;
}

bool CanMount() { return geteuid() == 0; }

}  // namespace neffd::test_support
