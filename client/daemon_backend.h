// client/daemon_backend.h (internal to the client library)
//
// DaemonBackend runs the get-or-compile protocol against neffd over gRPC
// (proto/neffd/v1/neffd.proto). A granted lease is kept alive by a background
// thread on a Hold stream (a message every ttl/3) until the lease is
// published, failed or abandoned; the stream binds the lease to this
// process's connection, so when the process dies the daemon hands the key
// on at once, even from a container whose pid and hostname it cannot see.
// Against a daemon without Hold the thread sends KeepAlive calls instead.
// Publish stages the file in the lease's staging directory (a fresh single-link
// file named "{key}.{pid}.{n}.staged", which the daemon removes) or, for small
// hlo entries, sends it inline. Staged files of the same key left by dead
// processes of this host are removed when a lease is granted.
//
// Holders are identified as {hostname, getpid(), rank}, so the daemon also
// sees a dead holder of its own namespaces through /proc.
//
// A Lock that waits asks to wait on a wake notice (store/wake_notice.h):
// the daemon answers PARKED with the notice's path at once and the call
// waits on the file, woken with the key's other waiters by one futex call;
// an answer that is not READY or FAILED (ask again), a notice that is gone,
// or a writer that died is asked again with the time left. A notice this
// process cannot open (another mount namespace without {local_dir}, a user
// outside the group) turns notices off for the backend: it waits as a parked
// call then, as against a daemon that predates them.
//
// Thread-safe. Errors follow client/backend.h.
#ifndef NEFFD_CLIENT_DAEMON_BACKEND_H_
#define NEFFD_CLIENT_DAEMON_BACKEND_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "client/backend.h"
#include "grpcpp/channel.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "store/env.h"

namespace neffd {

struct DaemonBackendOptions {
  std::string address;  // for messages
  std::string host;
  int64_t rank = 0;
  // Deadline of calls that do not wait (Lookup, KeepAlive, Unlock).
  absl::Duration call_timeout = absl::Seconds(30);
  // Deadline of Publish (the daemon copies and hashes the file).
  absl::Duration publish_timeout = absl::Hours(1);
  // hlo entries up to this size are sent inline.
  uint64_t max_inline_bytes = uint64_t{16} << 20;
  Env* env = Env::Default();  // starts each lease's heartbeat thread
};

class DaemonBackend : public Backend {
 public:
  DaemonBackend(DaemonBackendOptions options,
                std::shared_ptr<grpc::Channel> channel);

  absl::StatusOr<v1::LookupResponse> Lookup(const EntryKey& id) override;
  absl::StatusOr<LockAnswer> Lock(const EntryKey& id,
                                  absl::Duration wait) override;
  // One Lock call with `look_up` set.
  absl::StatusOr<LockAnswer> LookupOrLock(const EntryKey& id,
                                          absl::Duration wait) override;

 private:
  class DaemonLease;

  absl::StatusOr<LockAnswer> CallLock(const EntryKey& id, absl::Duration wait,
                                      bool look_up);
  // One Lock call; waits `wait` (at least a second) if it is not zero.
  absl::StatusOr<v1::LockResponse> LockCall(const EntryKey& id,
                                            absl::Duration wait, bool look_up,
                                            bool wake_file);
  // Waits on the PARKED answer's notice; the answer READY or FAILED, or
  // TIMED_OUT at `deadline` (MonotonicNow), or nullopt: ask again.
  std::optional<v1::LockResponse> WaitParked(const std::string& path,
                                             absl::Duration deadline);

  // Keeps a resolved lease's heartbeat thread, whose stream was cancelled,
  // to be joined by the next one retired or by the destructor.
  void RetireHeartbeat(EnvThread heartbeat);

  const DaemonBackendOptions options_;
  const std::unique_ptr<v1::CompileCache::Stub> stub_;
  std::atomic<bool> wake_files_{true};
  absl::Mutex retired_mu_;
  // Declared after stub_: joined before the stub they use is destroyed.
  std::vector<EnvThread> retired_ ABSL_GUARDED_BY(retired_mu_);
};

}  // namespace neffd

#endif  // NEFFD_CLIENT_DAEMON_BACKEND_H_
