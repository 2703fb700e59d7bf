#include "client/daemon_backend.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "client/daemon_channel.h"
#include "client/staged_output.h"
#include "grpcpp/grpcpp.h"
#include "store/file_util.h"
#include "store/liveness.h"
#include "store/wake_notice.h"

namespace neffd {
namespace {

// Maps a failed call to the backend's conventions (client/backend.h): the
// request's own faults keep their code, transport failures are Unavailable,
// and the daemon's other errors (disk full, ...) keep theirs, named.
absl::Status FromGrpc(const grpc::Status& status, absl::string_view address,
                      absl::string_view call) {
  const std::string message = status.error_message();
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
      return absl::InvalidArgumentError(message);
    case grpc::StatusCode::FAILED_PRECONDITION:
      return absl::FailedPreconditionError(message);
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
    case grpc::StatusCode::CANCELLED:
    case grpc::StatusCode::UNIMPLEMENTED:
    case grpc::StatusCode::UNKNOWN:
      return absl::UnavailableError(
          absl::StrCat("neffd at ", address, ": ", call, ": ", message));
    default:
      return absl::Status(
          static_cast<absl::StatusCode>(status.error_code()),
          absl::StrCat("neffd at ", address, ": ", call, ": ", message));
  }
}

// Staged names: "{key prefix}.{pid}.{n}-{64 random bits}.staged", a valid
// daemon token that no other user of the shared staging dir can predict
// (and so squat on, O_EXCL refusing to follow).
std::string StagedPrefix(const EntryKey& id) {
  return absl::StrCat(id.key().substr(0, 64), ".");
}

std::string StagedName(const EntryKey& id) {
  static std::atomic<uint64_t> counter{0};
  return absl::StrCat(StagedPrefix(id), getpid(), ".", counter++, "-",
                      RandomHex(8), ".staged");
}

// Removes this key's staged files whose writer (pid in the name) is gone.
void SweepStaged(const std::string& staging_dir, const EntryKey& id) {
  DIR* dir = opendir(staging_dir.c_str());
  if (dir == nullptr) return;
  const std::string prefix = StagedPrefix(id);
  std::vector<std::string> stale;
  while (struct dirent* e = readdir(dir)) {
    absl::string_view name = e->d_name;
    if (!absl::StartsWith(name, prefix) || !absl::EndsWith(name, ".staged")) {
      continue;
    }
    std::vector<absl::string_view> parts =
        absl::StrSplit(name.substr(prefix.size()), '.');
    int64_t pid = 0;
    if (parts.size() == 3 && absl::SimpleAtoi(parts[0], &pid) && pid > 0 &&
        ProcessIsGone(pid)) {
      stale.emplace_back(name);
    }
  }
  closedir(dir);
  for (const std::string& name : stale) {
    unlink(absl::StrCat(staging_dir, "/", name).c_str());
  }
}

}  // namespace

class DaemonBackend::DaemonLease : public Lease {
 public:
  DaemonLease(DaemonBackend* backend, EntryKey id, v1::Lease lease)
      : backend_(backend), id_(std::move(id)), lease_(std::move(lease)) {
    const absl::Duration every = std::max(
        absl::Milliseconds(lease_.ttl_ms()) / 3, absl::Milliseconds(50));
    heartbeat_ = backend_->options_.env->StartThread(
        "neffd-heartbeat",
        [backend, beat = beat_, lease_id = lease_.lease_id(), every] {
          if (!HoldOnStream(backend, *beat, lease_id, every)) {
            KeepAliveByCalls(backend, *beat, lease_id, every);
          }
        });
  }

  ~DaemonLease() override {
    StopHeartbeat(/*wait=*/true);
    if (resolved_) return;
    v1::UnlockRequest request;
    request.set_lease_id(lease_.lease_id());
    *request.mutable_id() = id_.ToProto();
    request.set_outcome(v1::UnlockRequest::ABANDONED);
    v1::UnlockResponse ignored;
    (void)backend_->stub_->Unlock(
        ContextWithTimeout(backend_->options_.call_timeout).get(), request,
        &ignored);
  }

  absl::StatusOr<v1::Entry> Publish(
      const std::string& path, const CopyResult& content,
      const std::map<std::string, std::string>& metadata,
      FileAfterPublish after) override {
    v1::PublishRequest request;
    request.set_lease_id(lease_.lease_id());
    *request.mutable_id() = id_.ToProto();
    request.set_size(content.size);
    request.set_sha256(content.sha256);
    request.mutable_metadata()->insert(metadata.begin(), metadata.end());
    std::optional<StagedOutput> staged;
    if (id_.ns() == Namespace::kHlo &&
        content.size <= backend_->options_.max_inline_bytes) {
      absl::StatusOr<std::string> bytes = ReadSmallFile(path, content.size);
      if (!bytes.ok()) return bytes.status();
      request.set_inline_bytes(*std::move(bytes));
    } else {
      // Not hashed here: the daemon hashes the staged bytes as it reads
      // them (and checks them against a sha256 the request carries).
      absl::StatusOr<StagedOutput> stage = StagedOutput::Stage(
          path, content.size,
          absl::StrCat(lease_.staging_dir(), "/", StagedName(id_)),
          after == FileAfterPublish::kMayBeTaken);
      if (!stage.ok()) return stage.status();
      staged = *std::move(stage);
      request.set_staged_path(staged->staged_path());
    }
    v1::PublishResponse response;
    grpc::Status status = backend_->stub_->Publish(
        ContextWithTimeout(backend_->options_.publish_timeout).get(), request,
        &response);
    if (staged.has_value()) staged->Finish(status.ok());
    if (status.error_code() == grpc::StatusCode::INVALID_ARGUMENT &&
        content.sha256.empty() &&
        absl::StartsWith(status.error_message(), "sha256:")) {
      // A daemon from before the digest was optional: hash, and ask again.
      absl::StatusOr<CopyResult> hashed = HashFile(path);
      if (!hashed.ok()) return hashed.status();
      return Publish(path, *hashed, metadata, after);
    }
    if (!status.ok()) return Error(status, "Publish");
    resolved_ = true;
    StopHeartbeat(/*wait=*/false);
    return response.entry();
  }

  absl::StatusOr<v1::Failure> Fail(const std::string& log) override {
    v1::UnlockRequest request;
    request.set_lease_id(lease_.lease_id());
    *request.mutable_id() = id_.ToProto();
    request.set_outcome(v1::UnlockRequest::FAILED);
    // The daemon takes at most 1 MiB of log; the end says what failed.
    constexpr size_t kMaxLogBytes = 1 << 20;
    request.set_log(log.size() > kMaxLogBytes
                        ? log.substr(log.size() - kMaxLogBytes)
                        : log);
    v1::UnlockResponse ignored;
    grpc::Status status = backend_->stub_->Unlock(
        ContextWithTimeout(backend_->options_.call_timeout).get(), request,
        &ignored);
    if (!status.ok()) return Error(status, "Unlock");
    resolved_ = true;
    StopHeartbeat(/*wait=*/false);
    // Answer with the failure exactly as the waiters got it.
    absl::StatusOr<v1::LookupResponse> recorded = backend_->Lookup(id_);
    if (recorded.ok() && recorded->result() == v1::LookupResponse::FAILED) {
      return recorded->failure();
    }
    v1::Failure failure;
    failure.set_log(log);
    return failure;
  }

 private:
  // What the lease and its heartbeat thread share: the thread may outlive
  // the lease, which returns as soon as it is resolved.
  struct Beat {
    absl::Notification stop;
    absl::Mutex mu;
    grpc::ClientContext* stream_context ABSL_GUARDED_BY(mu) = nullptr;
  };

  // Ends the heartbeat: its stream is cancelled at once. With `wait`, the
  // thread is joined here; without, a resolved lease's caller does not wait
  // for it (under an SPMD step's load, a thread's wake-up is ~1 ms): the
  // backend joins it later (RetireHeartbeat).
  void StopHeartbeat(bool wait) {
    if (!heartbeat_.joinable()) return;
    beat_->stop.Notify();
    {
      absl::MutexLock lock(&beat_->mu);
      if (beat_->stream_context != nullptr) beat_->stream_context->TryCancel();
    }
    if (wait) {
      heartbeat_.Join();
    } else {
      backend_->RetireHeartbeat(std::move(heartbeat_));
    }
  }

  // Keeps the lease on a Hold stream, so that the daemon revokes it the
  // moment this process dies (its socket closes) rather than after the TTL.
  // False if the daemon does not offer Hold (an older neffd): the caller
  // renews with KeepAlive calls instead.
  static bool HoldOnStream(DaemonBackend* backend, Beat& beat,
                           const std::string& lease_id, absl::Duration every) {
    grpc::ClientContext context;
    {
      absl::MutexLock lock(&beat.mu);
      if (beat.stop.HasBeenNotified()) return true;
      beat.stream_context = &context;
    }
    auto stream = backend->stub_->Hold(&context);
    v1::KeepAliveRequest request;
    request.set_lease_id(lease_id);
    v1::KeepAliveResponse response;
    bool first = true;
    while (stream->Write(request) && stream->Read(&response)) {
      first = false;
      if (beat.stop.WaitForNotificationWithTimeout(every)) break;
    }
    // The lease is resolved (StopHeartbeat cancelled the stream), revoked,
    // or the daemon went away; none of them is retried on a new stream.
    grpc::Status status = stream->Finish();
    {
      absl::MutexLock lock(&beat.mu);
      beat.stream_context = nullptr;
    }
    return !(first && status.error_code() == grpc::StatusCode::UNIMPLEMENTED);
  }

  static void KeepAliveByCalls(DaemonBackend* backend, Beat& beat,
                               const std::string& lease_id,
                               absl::Duration every) {
    while (!beat.stop.WaitForNotificationWithTimeout(every)) {
      v1::KeepAliveRequest request;
      request.set_lease_id(lease_id);
      v1::KeepAliveResponse response;
      grpc::Status status = backend->stub_->KeepAlive(
          ContextWithTimeout(every).get(), request, &response);
      // A revoked lease cannot come back; a daemon that is down may.
      if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
        return;
      }
    }
  }

  absl::Status Error(const grpc::Status& status, absl::string_view call) {
    return FromGrpc(status, backend_->options_.address, call);
  }

  DaemonBackend* const backend_;
  const EntryKey id_;
  const v1::Lease lease_;
  bool resolved_ = false;
  const std::shared_ptr<Beat> beat_ = std::make_shared<Beat>();
  EnvThread heartbeat_;
};

void DaemonBackend::RetireHeartbeat(EnvThread heartbeat) {
  std::vector<EnvThread> ended;
  {
    absl::MutexLock lock(&retired_mu_);
    ended.swap(retired_);
    retired_.push_back(std::move(heartbeat));
  }
  // Their streams were cancelled a compile or more ago: these joins return.
  ended.clear();
}

DaemonBackend::DaemonBackend(DaemonBackendOptions options,
                             std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      stub_(v1::CompileCache::NewStub(std::move(channel))) {}

absl::StatusOr<v1::LookupResponse> DaemonBackend::Lookup(const EntryKey& id) {
  v1::LookupRequest request;
  *request.mutable_id() = id.ToProto();
  v1::LookupResponse response;
  grpc::Status status = stub_->Lookup(
      ContextWithTimeout(options_.call_timeout).get(), request, &response);
  if (!status.ok()) return FromGrpc(status, options_.address, "Lookup");
  return response;
}

absl::StatusOr<LockAnswer> DaemonBackend::Lock(const EntryKey& id,
                                               absl::Duration wait) {
  return CallLock(id, wait, /*look_up=*/false);
}

absl::StatusOr<LockAnswer> DaemonBackend::LookupOrLock(const EntryKey& id,
                                                       absl::Duration wait) {
  return CallLock(id, wait, /*look_up=*/true);
}

absl::StatusOr<v1::LockResponse> DaemonBackend::LockCall(const EntryKey& id,
                                                         absl::Duration wait,
                                                         bool look_up,
                                                         bool wake_file) {
  v1::LockRequest request;
  *request.mutable_id() = id.ToProto();
  request.set_look_up(look_up);
  request.mutable_holder()->set_host(options_.host);
  request.mutable_holder()->set_pid(getpid());
  request.mutable_holder()->set_rank(options_.rank);
  const bool waits = wait > absl::ZeroDuration();
  request.set_wait(waits);
  if (waits) {
    request.set_wait_seconds(static_cast<uint32_t>(std::clamp<int64_t>(
        absl::ToInt64Seconds(absl::Ceil(wait, absl::Seconds(1))), 1,
        UINT32_MAX)));
    request.set_wake_file(wake_file);
  }
  v1::LockResponse response;
  // The daemon bounds the wait; the deadline only guards against a hang.
  grpc::Status status =
      stub_->Lock(ContextWithTimeout(wait + options_.call_timeout).get(),
                  request, &response);
  if (!status.ok()) return FromGrpc(status, options_.address, "Lock");
  return response;
}

std::optional<v1::LockResponse> DaemonBackend::WaitParked(
    const std::string& path, absl::Duration deadline) {
  absl::StatusOr<WakeWait> woke =
      WaitForNotice(options_.env, path, deadline, absl::Seconds(1));
  if (!woke.ok()) {
    // Gone: answered and removed before this rank looked (ask again). Any
    // other failure will repeat: wait as parked calls from now on.
    if (!absl::IsNotFound(woke.status())) wake_files_ = false;
    return std::nullopt;
  }
  v1::LockResponse answer;
  switch (woke->end) {
    case WakeWait::End::kTimedOut:
      answer.set_outcome(v1::LockResponse::TIMED_OUT);
      return answer;
    case WakeWait::End::kAbandoned:
      return std::nullopt;
    case WakeWait::End::kAnswered:
      break;
  }
  if (!answer.ParseFromString(woke->answer) ||
      (answer.outcome() != v1::LockResponse::READY &&
       answer.outcome() != v1::LockResponse::FAILED)) {
    return std::nullopt;
  }
  return answer;
}

absl::StatusOr<LockAnswer> DaemonBackend::CallLock(const EntryKey& id,
                                                   absl::Duration wait,
                                                   bool look_up) {
  if (wait < absl::Seconds(1)) wait = absl::ZeroDuration();
  const absl::Duration deadline = options_.env->MonotonicNow() + wait;
  absl::StatusOr<v1::LockResponse> response =
      LockCall(id, wait, look_up, wake_files_.load());
  // Parked on a notice: wait on it; asked again (never as the lookup,
  // which the first call was) until an answer or the deadline.
  bool parked_again = false;
  while (response.ok() && response->outcome() == v1::LockResponse::PARKED) {
    if (std::optional<v1::LockResponse> answer =
            WaitParked(response->wake_file(), deadline)) {
      *response = *std::move(answer);
      break;
    }
    // On a notice once more at most, then as a parked call: a notice that
    // is gone every time is not a race, and must not loop.
    const bool wake_file = wake_files_.load() && !parked_again;
    parked_again = true;
    const absl::Duration left = deadline - options_.env->MonotonicNow();
    if (left <= absl::ZeroDuration()) {
      response->Clear();
      response->set_outcome(v1::LockResponse::TIMED_OUT);
      break;
    }
    response = LockCall(id, left, /*look_up=*/false, wake_file);
  }
  if (!response.ok()) return response.status();
  LockAnswer answer;
  answer.outcome = response->outcome();
  answer.at_once = response->at_once();
  switch (response->outcome()) {
    case v1::LockResponse::GRANTED:
      SweepStaged(response->lease().staging_dir(), id);
      answer.lease = std::make_unique<DaemonLease>(this, id, response->lease());
      break;
    case v1::LockResponse::READY:
      answer.entry = response->entry();
      break;
    case v1::LockResponse::FAILED:
      answer.failure = response->failure();
      break;
    case v1::LockResponse::TIMED_OUT:
    case v1::LockResponse::BUSY:
      break;
    default:
      return absl::UnavailableError(absl::StrCat("neffd at ", options_.address,
                                                 ": Lock: unexpected outcome ",
                                                 response->outcome()));
  }
  return answer;
}

}  // namespace neffd
