// RemoteTier's write-behind: the uploader thread drains the Outbox
// (remote_tier.h explains the protocol).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <limits>

#include "absl/strings/str_cat.h"
#include "daemon/log/log.h"
#include "daemon/remote_tier/remote_tier.h"
#include "store/done_record.h"
#include "store/file_util.h"
#include "store/unique_fd.h"

namespace neffd {
namespace {

// How often an idle uploader looks for work it was not woken for (rows due
// after a backoff).
constexpr absl::Duration kIdlePoll = absl::Milliseconds(500);

// model.done is a small record; a larger one is damage, never uploaded.
constexpr uint64_t kMaxDoneRecordBytes = 1 << 20;

}  // namespace

void RemoteTier::UploadLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      const absl::Time due = outbox_->NextDueTime();
      const absl::Time now = parts_.env->Now();
      const absl::Duration wait = std::min(due - now, kIdlePoll);
      // Woken early by a stored publish (or Stop); a spurious wake-up only
      // looks.
      if (!stopping_ && wait > absl::ZeroDuration()) {
        upload_wake_.WaitWithTimeout(&mu_, wait);
      }
      if (stopping_) return;
    }
    while (std::optional<OutboxItem> item = outbox_->NextDue()) {
      bool absent = false;
      absl::Status uploaded = Upload(*item, &absent);
      if (absent) {
        Absent(*item);
      } else if (uploaded.ok()) {
        outbox_->Done(*item);
      } else if (S3Gate::IsSkipped(uploaded)) {
        outbox_->Retry(*item, gate_.breaker().open_until, false);
      } else {
        ++upload_failures_;
        outbox_->Retry(*item, absl::InfinitePast(), true);
      }
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
    }
  }
}

void RemoteTier::Absent(const OutboxItem& item) {
  if (!outbox_->Absent(item)) {
    // Queued by an earlier run whose publish may not have committed; the
    // entry may still appear (outbox.h).
    log::Info("upload_deferred", {{"id", item.id.Canonical()},
                                  {"reason", "no complete entry yet"}});
    return;
  }
  log::Warning(
      "upload_dropped",
      {{"id", item.id.Canonical()},
       {"reason", item.committed ? "no complete entry on the shared store any "
                                   "more"
                                 : "its publish never completed: no complete "
                                   "entry on the shared store"}});
}

absl::Status RemoteTier::Upload(const OutboxItem& item, bool* absent) {
  const EntryKey& id = item.id;
  const Store& store = parts_.catalog->StoreFor(id);
  // model.done first: once it is there, the artifact it names is whole
  // (the store's commit order), so no partial entry is ever sent. Opened as
  // every shared-store file is: a FIFO planted in a queued entry is damage,
  // not an open that blocks the uploader and every upload queued after it.
  absl::StatusOr<RegularFile> done_file =
      OpenRegularFile(store.PathsOf(id).done(), kMaxDoneRecordBytes);
  absl::StatusOr<RegularFile> artifact_file =
      done_file.ok() ? OpenRegularFile(store.ArtifactPath(id),
                                       std::numeric_limits<uint64_t>::max())
                     : absl::NotFoundError("no model.done");
  if (!done_file.ok() || !artifact_file.ok()) {
    const absl::Status& why =
        done_file.ok() ? artifact_file.status() : done_file.status();
    // Damage is not an entry still being written: waiting cannot mend it,
    // and a republish queues the key again.
    if (IsDamage(why)) {
      log::Warning("upload_dropped",
                   {{"id", id.Canonical()}, {"reason", why.message()}});
      return absl::OkStatus();
    }
    *absent = true;
    return absl::OkStatus();
  }
  const struct stat& done_stat = done_file->st;
  const struct stat& artifact_stat = artifact_file->st;
  std::string done_text(done_stat.st_size, '\0');
  if (pread(done_file->fd.get(), done_text.data(), done_text.size(), 0) !=
      static_cast<ssize_t>(done_text.size())) {
    return absl::ErrnoToStatus(errno, "read model.done");
  }
  absl::StatusOr<v1::DoneRecord> done = ParseDoneRecord(done_text);
  if (!done.ok() ||
      done->size() != static_cast<uint64_t>(artifact_stat.st_size)) {
    log::Warning("upload_dropped",
                 {{"id", id.Canonical()},
                  {"reason", "the shared store's entry is damaged"}});
    return absl::OkStatus();
  }
  const std::string done_name =
      remote::RemoteObjectName(location_, id, remote::RemoteFile::kDoneRecord);
  absl::StatusOr<remote::ObjectInfo> there = gate_.Run<remote::ObjectInfo>(
      [&] { return client_->HeadObject(done_name); });
  if (there.ok()) {
    log::Debug("upload_skipped",
               {{"id", id.Canonical()}, {"reason", "already in S3"}});
    return absl::OkStatus();
  }
  if (!S3Gate::IsNotFound(there.status())) return there.status();
  // The artifact first, model.done last: a reader that finds model.done
  // finds a whole artifact beside it.
  const std::string artifact_name =
      remote::RemoteObjectName(location_, id, remote::RemoteFile::kArtifact);
  if (absl::Status s = gate_.Run([&] {
        return client_->UploadFile(artifact_name, artifact_file->fd.get());
      });
      !s.ok()) {
    return s;
  }
  absl::StatusOr<RegularFile> flags_file = OpenRegularFile(
      store.PathsOf(id).key_inputs(), std::numeric_limits<uint64_t>::max());
  if (flags_file.ok()) {
    const std::string flags_name = remote::RemoteObjectName(
        location_, id, remote::RemoteFile::kCompileFlags);
    if (absl::Status s = gate_.Run([&] {
          return client_->PutObject(flags_name, flags_file->fd.get(), 0,
                                    flags_file->st.st_size);
        });
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = gate_.Run([&] {
        return client_->PutObject(done_name, done_file->fd.get(), 0,
                                  done_text.size());
      });
      !s.ok()) {
    return s;
  }
  ++uploads_;
  log::Info("remote_uploaded",
            {{"id", id.Canonical()},
             {"bytes", static_cast<uint64_t>(artifact_stat.st_size)},
             {"queued_ms",
              absl::ToInt64Milliseconds(
                  parts_.env->Now() -
                  absl::FromUnixMillis(item.record.enqueued_unix_ms()))}});
  return absl::OkStatus();
}

}  // namespace neffd
