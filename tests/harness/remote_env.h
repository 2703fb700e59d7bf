// tests/harness/remote_env.h
//
// What the S3 tier's end-to-end tests share (tests/remote_tier_test.cc,
// tests/remote_large_test.cc): real daemons pointed at a real s3rver on
// loopback (servers.h), with the flags and environment that make them use
// it, and the observations those tests make: a daemon's stats, the
// server's request log, entries put into S3 the way another cluster's
// daemon would have.
//
// Not thread-safe per object.
#ifndef NEFFD_TESTS_HARNESS_REMOTE_ENV_H_
#define NEFFD_TESTS_HARNESS_REMOTE_ENV_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "daemon/s3/credentials.h"
#include "daemon/s3/s3_client.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "tests/harness/process.h"
#include "tests/harness/servers.h"

namespace neffd::test_support {

inline constexpr char kRemoteBucket[] = "neffd-test";
inline constexpr char kRemotePrefix[] = "cache";
inline constexpr char kCompilerVersion[] = "2.19.0";

// --remote and --s3_endpoint for `server`, and a short --poll_interval so
// a host waiting for another host's fetch notices it soon.
std::vector<std::string> RemoteFlags(const LoopbackServer& server);

// The environment that gives a daemon the test server's credentials and
// nothing from the machine (no metadata service, no ~/.aws).
std::vector<std::string> S3Env();
// The same without credentials of its own (tests add their source).
std::vector<std::string> S3EnvWithoutKeys();

v1::EntryId NeffId(const std::string& key);
// "PREFIX/{k0k1}/{k2k3}/KEY.neff" for "model.neff", else
// "PREFIX/{k0k1}/{k2k3}/KEY.neffd/FILE" (model.done, compile_flags.json).
std::string ObjectName(const std::string& key, const std::string& file);

// Bytes that differ per key, of a size that is not a round number.
std::string NeffBytes(const std::string& key, size_t size = 300 * 1024 + 7);

// Waits (60 s at most) until `daemon` has uploaded `count` entries and
// queues nothing; otherwise an error saying what its stats showed, with
// `server`'s request log.
absl::Status UploadedAll(const DaemonProcess& daemon,
                         const LoopbackServer& server, uint64_t count);

// A Lock call as a rank makes it (wait=true).
v1::LockResponse LockKey(const DaemonProcess& daemon, const v1::EntryId& id);

// How many requests `method` for an object whose path ends in
// `path_suffix` the server answered 200.
int CountRequests(const LoopbackServer& server, const std::string& method,
                  const std::string& path_suffix);
// How many requests of any writing method (PUT, POST, DELETE) it got.
int CountWrites(const LoopbackServer& server);

// A client of `server`'s bucket with the test credentials, for putting,
// altering and reading objects behind the daemons' backs.
class S3TestClient {
 public:
  explicit S3TestClient(const LoopbackServer& server);
  // An entry as a daemon uploads it: model.neff, then model.done.
  absl::Status PutEntry(const std::string& key, const std::string& bytes);
  absl::Status Put(const std::string& object, const std::string& bytes);
  absl::StatusOr<std::string> Get(const std::string& object);

 private:
  remote::CredentialsProvider credentials_;
  std::unique_ptr<remote::S3Client> client_;
};

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_HARNESS_REMOTE_ENV_H_
