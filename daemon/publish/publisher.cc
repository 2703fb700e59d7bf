#include "daemon/publish/publisher.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/log/log.h"
#include "store/digest.h"
#include "store/file_util.h"

namespace neffd {
namespace {

// Opens a client-staged file for reading, refusing anything that is not a
// regular file with a single link: a symlink or hard link must not let a
// client publish (and so read) a file it could not read itself.
absl::StatusOr<UniqueFd> OpenStagedFile(const std::string& path,
                                        uint64_t size) {
  UniqueFd fd(
      open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno == ELOOP) {
      return absl::FailedPreconditionError(
          absl::StrCat("staged_path: ", path, " is a symlink"));
    }
    return absl::FailedPreconditionError(
        absl::ErrnoToStatus(errno, "staged_path: " + path).message());
  }
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("staged_path: ", path, " is not a regular file"));
  }
  if (st.st_nlink != 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("staged_path: ", path, " has ", st.st_nlink,
                     " hard links; stage a file of your own"));
  }
  if (static_cast<uint64_t>(st.st_size) != size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "size: the staged file is %d bytes; the request says %d", st.st_size,
        size));
  }
  return fd;
}

}  // namespace

Publisher::Publisher(PublisherOptions options, Catalog* catalog,
                     LockTable* locks, LocalTier* tier)
    : options_(std::move(options)),
      catalog_(catalog),
      locks_(locks),
      tier_(tier),
      answerer_(options_.env) {}

absl::StatusOr<Published> Publisher::Publish(const EntryKey& id,
                                             const Artifact& artifact,
                                             PublishIntent* intent) {
  const absl::Time started = options_.env->Now();
  if (absl::Status s = locks_->BeginPublish(artifact.lease_id, id); !s.ok()) {
    if (intent != nullptr) intent->End(false);
    return s;
  }
  auto begin = [&](const CopyResult& content) {
    if (intent != nullptr) intent->Begin(id, content.size, content.sha256);
  };
  absl::StatusOr<PublishResult> result =
      artifact.inline_bytes.has_value()
          ? catalog_->StoreFor(id).PublishBytes(
                id, *artifact.inline_bytes, artifact.sha256,
                Producer{options_.host_id, 0}, artifact.metadata, begin)
          : PublishStaged(id, artifact, started, begin);
  if (intent != nullptr) intent->End(result.ok() && !result->already_cached);
  if (!result.ok()) {
    locks_->FinishPublish(artifact.lease_id, nullptr);
    return result.status();
  }
  absl::Status indexed = catalog_->Record(id, result->stored);
  Published published;
  published.entry = ServeLocally(tier_, id, result->stored.entry);
  published.already_cached = result->already_cached;
  locks_->FinishPublish(artifact.lease_id, &published.entry);
  if (!indexed.ok()) {
    // The entry is on the store, which is the truth: the publish succeeded,
    // and the index learns of the entry at its first lookup that can write.
    log::Warning("index_write_failed",
                 {{"entry", id.Canonical()}, {"error", indexed.message()}});
  }
  if (!published.already_cached) {
    log::Info("published",
              {{"entry", id.Canonical()},
               {"bytes", published.entry.size()},
               {"lease", artifact.lease_id},
               {"since_publish_us",
                absl::ToInt64Microseconds(options_.env->Now() - started)},
               {"started_unix_us", absl::ToUnixMicros(started)}});
  }
  return published;
}

absl::StatusOr<PublishResult> Publisher::PublishStaged(
    const EntryKey& id, const Artifact& artifact, absl::Time started,
    const Store::Verified& begin) {
  absl::StatusOr<UniqueFd> staged =
      OpenStagedFile(artifact.staged_path, artifact.size);
  if (!staged.ok()) return staged.status();
  if (options_.check_staged) {
    if (absl::Status s = options_.check_staged(artifact.staged_path); !s.ok()) {
      unlink(artifact.staged_path.c_str());
      return s;
    }
  }
  Store& store = catalog_->StoreFor(id);
  const Producer producer{options_.host_id, 0};
  if (!TierServes(tier_, id) || store.HasDoneRecord(id)) {
    // The store reads and hashes the staged file itself, and says what is
    // wrong with it (or that it has the entry already: its bytes, not
    // these, are the entry then).
    absl::StatusOr<PublishResult> result =
        store.PublishFromFd(id, staged->get(), artifact.size, artifact.sha256,
                            producer, artifact.metadata, begin);
    unlink(artifact.staged_path.c_str());
    return result;
  }
  v1::Entry local;
  *local.mutable_id() = id.ToProto();
  local.set_size(artifact.size);
  local.set_sha256(artifact.sha256);  // empty: the bytes' own digest
  local.set_producer_host(options_.host_id);
  local.set_publish_time_unix_ms(absl::ToUnixMillis(options_.env->Now()));
  local.mutable_metadata()->insert(artifact.metadata.begin(),
                                   artifact.metadata.end());
  absl::StatusOr<UniqueFd> ingested =
      absl::FailedPreconditionError("not ingested");
  Answerer::Ticket answered;
  auto answer_waiters = [&] {
    answered = AnswerWaiters(id, local, artifact.lease_id, started);
  };
  absl::StatusOr<PublishResult> result;
  if (artifact.size <= kAnswerBeforeStoreMaxBytes) {
    // Small: the tier's copy first and this host's waiters answered with
    // it before the store is touched at all (its metadata round trips cost
    // more than these bytes); the store then copies the tier's file in the
    // kernel, without hashing it again.
    ingested = tier_->Ingest(id, &local, artifact.staged_path, staged->get());
    if (ingested.ok()) answer_waiters();
    // Else the store reads the staged file from its start and says what is
    // wrong with it.
    if (!ingested.ok()) (void)lseek(staged->get(), 0, SEEK_SET);
    result = store.PublishFromFd(
        id, ingested.ok() ? ingested->get() : staged->get(), artifact.size,
        ingested.ok() ? local.sha256() : artifact.sha256, producer,
        artifact.metadata, begin);
  } else {
    // Large: one read of the staged file, hashed once, writes the tier's
    // copy and the store's temp file, whose writeback starts behind the
    // copy; the waiters are answered once the store has checked the
    // bytes, while it fsyncs them.
    result = store.PublishWritten(
        id, artifact.size, artifact.sha256, producer, artifact.metadata,
        [&](int out_fd,
            absl::string_view out_name) -> absl::StatusOr<CopyResult> {
          ingested =
              tier_->Ingest(id, &local, artifact.staged_path, staged->get(),
                            CopyTee{out_fd, out_name, /*sync_behind=*/true});
          if (ingested.ok()) return CopyResult{local.size(), local.sha256()};
          // The store's own pass over the staged file, from its start, on
          // an emptied temp file: it says what is wrong with the bytes.
          if (lseek(staged->get(), 0, SEEK_SET) != 0 ||
              ftruncate(out_fd, 0) != 0 || lseek(out_fd, 0, SEEK_SET) != 0) {
            return absl::ErrnoToStatus(errno,
                                       absl::StrCat("rewinding ", out_name));
          }
          return CopyAndHash(
              staged->get(), out_fd, "staged file",
              {options_.env, out_name, /*sync_out_behind=*/true});
        },
        [&](const CopyResult& content) {
          if (ingested.ok()) answer_waiters();
          if (begin) begin(content);
        });
  }
  if (ingested.ok()) ForgetVerified(ingested->get());
  answered.Wait();
  // Not the tier's (or gone already): the daemon's to remove.
  if (!ingested.ok()) unlink(artifact.staged_path.c_str());
  return result;
}

Answerer::Ticket Publisher::AnswerWaiters(const EntryKey& id,
                                          const v1::Entry& local,
                                          const std::string& lease_id,
                                          absl::Time started) {
  // The moment the verified NEFF is in place under its served name, which
  // bench/storm takes as the release in every protocol.
  const absl::Time renamed = options_.env->Now();
  // Nobody parked (a lone rank's compile): no answering thread to wake.
  // Whoever parks from now on is answered when the publish ends.
  if (locks_->Waiting(lease_id) == 0) return {};
  absl::StatusOr<v1::Entry> served = tier_->Get(id, local);
  if (!served.ok()) return {};
  return answerer_.Run([this, id, served = *std::move(served), lease_id,
                        started, renamed] {
    const absl::Time released = options_.env->Now();
    const size_t waiters = locks_->AnswerWaiters(lease_id, served);
    const absl::Time answered = options_.env->Now();
    // When the entry was released to this host's waiters and how long
    // answering them all took (bench/storm measures the lock handoff from
    // `renamed_unix_us`, and its step profile reads all three).
    log::Info(
        "waiters_answered",
        {{"entry", id.Canonical()},
         {"waiters", static_cast<uint64_t>(waiters)},
         {"since_publish_us", absl::ToInt64Microseconds(answered - started)},
         {"released_unix_us", absl::ToUnixMicros(released)},
         {"renamed_unix_us", absl::ToUnixMicros(renamed)},
         {"answered_unix_us", absl::ToUnixMicros(answered)}});
  });
}

absl::StatusOr<RecordedFailure> Publisher::RecordFailure(
    const EntryKey& id, const std::string& lease_id,
    absl::string_view compiler_log) {
  if (absl::Status s = locks_->BeginPublish(lease_id, id); !s.ok()) return s;
  absl::StatusOr<v1::Failure> failure =
      catalog_->StoreFor(id).RecordFailure(id, compiler_log);
  locks_->FinishPublish(lease_id, nullptr);
  if (!failure.ok()) return failure.status();
  log::Info("compile_failure_recorded", {{"entry", id.Canonical()}});
  RecordedFailure recorded;
  recorded.failure = *std::move(failure);
  recorded.released = locks_->Release(lease_id, id, &recorded.failure);
  return recorded;
}

}  // namespace neffd
