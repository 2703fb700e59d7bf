// tests/harness/servers.h
//
// Loopback stand-ins for the remote services neffd talks to, each a real
// server process on a free 127.0.0.1 port, killed when its object goes:
//   - StartS3Server: s3rver (npm) with one bucket, plus the SigV4 signature
//     check s3rver lacks (s3_server.js); credentials kS3AccessKeyId /
//     kS3SecretAccessKey.
//   - StartImdsServer: the EC2 instance metadata service, IMDSv2
//     (imds_server.py).
// Both log one "METHOD PATH STATUS" line per request, so a test can count
// what reached the server.
//
// s3rver and aws4 are installed by deploy/install-deps.sh into
// /opt/neffd-test; when they are missing StartS3Server fails with a message
// saying so (CI installs them: a skip would hide a broken install).
//
// Not thread-safe per object.
#ifndef NEFFD_TESTS_HARNESS_SERVERS_H_
#define NEFFD_TESTS_HARNESS_SERVERS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "tests/harness/process.h"

namespace neffd::test_support {

inline constexpr char kS3AccessKeyId[] = "S3RVER";
inline constexpr char kS3SecretAccessKey[] = "S3RVER";
inline constexpr char kS3TestPrefix[] = "/opt/neffd-test";

// A server process that prints "listening PORT" once it accepts.
class LoopbackServer {
 public:
  // Starts `argv` and waits (up to 60 s: node starts slowly on a busy
  // machine) until it says it listens.
  static absl::StatusOr<std::unique_ptr<LoopbackServer>> Start(
      std::vector<std::string> argv);

  int port() const { return port_; }
  // "http://127.0.0.1:PORT"
  std::string url() const;
  Process& process() { return *process_; }
  // The lines it printed after "listening PORT" (one per request).
  std::vector<std::string> RequestLog() const;
  // SIGKILL, and reap it: the port refuses connections afterwards.
  void Kill();

 private:
  LoopbackServer(std::unique_ptr<Process> process, int port)
      : process_(std::move(process)), port_(port) {}

  std::unique_ptr<Process> process_;
  int port_;
};

// s3rver on `data_dir` with bucket `bucket` created, on `port` (0: a free
// one; pass a killed server's port to bring it back where clients expect it).
absl::StatusOr<std::unique_ptr<LoopbackServer>> StartS3Server(
    const std::string& data_dir, const std::string& bucket, int port = 0);

// An IMDSv2 stand-in handing out role `role`'s credentials, valid for
// `lifetime_seconds` from each answer.
absl::StatusOr<std::unique_ptr<LoopbackServer>> StartImdsServer(
    const std::string& access_key_id, const std::string& secret_access_key,
    const std::string& role, int lifetime_seconds);

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_HARNESS_SERVERS_H_
