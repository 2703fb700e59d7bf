// RemoteTier's read-through: the done record, the artifact, the publish
// (remote_tier.h explains the protocol); and warm, which runs it for a list.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "daemon/log/log.h"
#include "daemon/remote_tier/remote_tier.h"
#include "store/done_record.h"
#include "store/file_util.h"
#include "store/unique_fd.h"

namespace neffd {
namespace {

// A model.done is a few hundred bytes; anything much larger is not one.
constexpr uint64_t kMaxDoneRecordBytes = 1 << 20;

std::string ReadAll(int fd, uint64_t size) {
  std::string out(size, '\0');
  uint64_t at = 0;
  while (at < size) {
    const ssize_t n = pread(fd, out.data() + at, size - at, at);
    if (n <= 0) break;
    at += n;
  }
  out.resize(at);
  return out;
}

}  // namespace

absl::StatusOr<v1::DoneRecord> RemoteTier::FetchDoneRecord(const EntryKey& id) {
  // Unnamed, on the local disk: nothing to clean up, whatever happens.
  UniqueFd fd(
      open(parts_.staging_dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) {
    return absl::ErrnoToStatus(errno, "staging a remote model.done");
  }
  const std::string name =
      remote::RemoteObjectName(location_, id, remote::RemoteFile::kDoneRecord);
  absl::StatusOr<uint64_t> size = gate_.Run<uint64_t>(
      [&] { return lookup_client_->GetObject(name, fd.get()); });
  if (!size.ok()) return size.status();
  if (*size > kMaxDoneRecordBytes) {
    return absl::DataLossError(absl::StrCat("s3://", location_.bucket, "/",
                                            name, " is ", *size,
                                            " bytes: not a done record"));
  }
  absl::StatusOr<v1::DoneRecord> done =
      ParseDoneRecord(ReadAll(fd.get(), *size));
  if (!done.ok()) return absl::DataLossError(done.status().message());
  if (!done->key().empty() && done->key() != id.key()) {
    return absl::DataLossError(absl::StrCat("s3://", location_.bucket, "/",
                                            name, " records another key (",
                                            done->key(), ")"));
  }
  // As in the shared store: another compiler version's entry is a miss.
  if (!done->compiler_version().empty() && !id.compiler_version().empty() &&
      done->compiler_version() != id.compiler_version()) {
    return absl::NotFoundError(absl::StrCat(
        "s3://", location_.bucket, "/", name,
        " is recorded for compiler version ", done->compiler_version()));
  }
  return done;
}

FetchOutcome RemoteTier::FetchArtifact(const EntryKey& id,
                                       const std::string& lease_id,
                                       const v1::DoneRecord& done) {
  const std::string name =
      remote::RemoteObjectName(location_, id, remote::RemoteFile::kArtifact);
  const std::string staged = absl::StrCat(
      parts_.staging_dir, "/", UniqueTempName("remote", parts_.host_id));
  UniqueFd fd(open(staged.c_str(),
                   O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC | O_NOFOLLOW, 0644));
  if (!fd.valid()) {
    log::Warning(
        "remote_fetch_failed",
        {{"id", id.Canonical()},
         {"error", absl::StrCat("create ", staged, ": ", strerror(errno))}});
    return FetchOutcome::kFailed;
  }
  absl::StatusOr<uint64_t> size =
      gate_.Run<uint64_t>([&] { return client_->GetObject(name, fd.get()); });
  fd = UniqueFd();
  FetchOutcome outcome = FetchOutcome::kFailed;
  if (!size.ok()) {
    outcome = S3Gate::IsNotFound(size.status()) ? FetchOutcome::kAbsent
                                                : FetchOutcome::kFailed;
  } else if (*size != done.size()) {
    log::Warning(
        "remote_object_rejected",
        {{"id", id.Canonical()},
         {"reason", absl::StrCat("model object is ", *size,
                                 " bytes, model.done says ", done.size())}});
    outcome = FetchOutcome::kCorrupt;
  } else {
    Artifact artifact;
    artifact.lease_id = lease_id;
    artifact.staged_path = staged;
    artifact.size = done.size();
    artifact.sha256 = done.sha256();
    artifact.metadata.insert(done.metadata().begin(), done.metadata().end());
    // The store hashes the bytes as it copies them and refuses a mismatch:
    // an altered object is never published.
    absl::StatusOr<Published> published =
        parts_.publisher->Publish(id, artifact);
    if (published.ok()) {
      outcome = FetchOutcome::kPublished;
    } else if (absl::IsInvalidArgument(published.status())) {
      log::Warning(
          "remote_object_rejected",
          {{"id", id.Canonical()}, {"reason", published.status().message()}});
      outcome = FetchOutcome::kCorrupt;
    } else {
      log::Warning(
          "remote_fetch_failed",
          {{"id", id.Canonical()}, {"error", published.status().message()}});
    }
  }
  unlink(staged.c_str());  // adopted by the tier or removed already, usually
  return outcome;
}

FetchOutcome RemoteTier::Fetch(const EntryKey& id,
                               const std::string& lease_id) {
  absl::StatusOr<v1::DoneRecord> done = FetchDoneRecord(id);
  FetchOutcome outcome;
  if (done.ok()) {
    outcome = FetchArtifact(id, lease_id, *done);
  } else if (S3Gate::IsNotFound(done.status())) {
    outcome = FetchOutcome::kAbsent;
  } else if (absl::IsDataLoss(done.status())) {
    log::Warning("remote_object_rejected",
                 {{"id", id.Canonical()}, {"reason", done.status().message()}});
    outcome = FetchOutcome::kCorrupt;
  } else {
    outcome = FetchOutcome::kFailed;  // counted by cause by the client
  }
  switch (outcome) {
    case FetchOutcome::kPublished:
      ++hits_;
      log::Info("remote_fetched",
                {{"id", id.Canonical()}, {"bytes", done->size()}});
      break;
    case FetchOutcome::kAbsent:
      ++misses_;
      break;
    case FetchOutcome::kCorrupt:
      ++corrupt_;
      break;
    case FetchOutcome::kFailed:
      break;
  }
  return outcome;
}

void RemoteTier::Warm(
    const std::vector<EntryKey>& ids,
    const std::function<void(const v1::WarmProgress&)>& progress) {
  v1::WarmProgress p;
  p.set_total(ids.size());
  const HolderInfo self{parts_.host_id, getpid(), -1};
  for (const EntryKey& id : ids) {
    absl::StatusOr<std::optional<v1::Entry>> found = parts_.catalog->Find(id);
    if (found.ok() && found->has_value()) {
      p.set_cached(p.cached() + 1);
      (void)ServeLocally(parts_.tier, id, **found);
    } else {
      absl::Notification answered;
      LockEvent event;
      parts_.locks->Acquire(id, self, /*wait=*/false,
                            parts_.env->Now() + absl::Seconds(1),
                            [&](LockEvent e) {
                              event = std::move(e);
                              answered.Notify();
                            });
      answered.WaitForNotification();
      if (event.outcome == LockOutcome::kGranted) {
        {
          absl::MutexLock lock(&mu_);
          fetch_leases_.insert(event.lease_id);
        }
        const FetchOutcome outcome = Fetch(id, event.lease_id);
        {
          absl::MutexLock lock(&mu_);
          fetch_leases_.erase(event.lease_id);
        }
        if (outcome == FetchOutcome::kPublished) {
          p.set_fetched(p.fetched() + 1);
          found = parts_.catalog->Find(id);
          if (found.ok() && found->has_value()) {
            p.set_bytes(p.bytes() + (*found)->size());
            (void)ServeLocally(parts_.tier, id, **found);
          }
        } else {
          (void)parts_.locks->Release(event.lease_id, id, nullptr);
          p.set_missing(p.missing() + 1);
        }
      } else if (event.outcome == LockOutcome::kReady) {
        p.set_cached(p.cached() + 1);
      } else {
        p.set_busy(p.busy() + 1);
      }
    }
    p.set_checked(p.checked() + 1);
    progress(p);
  }
  p.set_finished(true);
  progress(p);
}

}  // namespace neffd
