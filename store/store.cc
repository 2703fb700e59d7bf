#include "store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/digest.h"
#include "store/done_record.h"
#include "store/file_util.h"

namespace neffd {
namespace {

constexpr char kDoneName[] = "model.done";
constexpr char kLogName[] = "model.log";
constexpr size_t kMaxDoneBytes = 1 << 20;
constexpr size_t kMaxLogBytes = 1 << 20;

int64_t MtimeNs(const struct stat &st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
         st.st_mtim.tv_nsec;
}

FileIdentity IdentityOf(const struct stat &st) {
  return FileIdentity{static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_size), MtimeNs(st),
                      static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 +
                          st.st_ctim.tv_nsec};
}

v1::Entry EntryFromDone(const EntryKey &id, const std::string &path,
                        const v1::DoneRecord &done) {
  v1::Entry entry;
  *entry.mutable_id() = id.ToProto();
  entry.set_path(path);
  entry.set_size(done.size());
  entry.set_sha256(done.sha256());
  entry.set_producer_host(done.producer_host());
  entry.set_producer_pid(done.producer_pid());
  entry.set_publish_time_unix_ms(done.publish_time_unix_ms());
  entry.mutable_metadata()->insert(done.metadata().begin(),
                                   done.metadata().end());
  return entry;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Store>> Store::Open(
    const StoreOptions &options) {
  if (options.root.empty() || options.root[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache root '", options.root, "' must be an absolute path"));
  }
  if (absl::Status s = MakeDirs(options.root); !s.ok()) return s;
  if (access(options.root.c_str(), W_OK | X_OK) != 0) {
    return absl::ErrnoToStatus(
        errno, absl::StrCat("cache root ", options.root,
                            " is not writable by this process"));
  }
  return std::unique_ptr<Store>(new Store(options));
}

absl::string_view Store::ArtifactName() const {
  return ArtifactFileName(options_.ns);
}

std::string Store::EntryDir(const EntryKey &id) const {
  return absl::StrCat(options_.root, "/", id.RelativeDir());
}

std::string Store::ArtifactPath(const EntryKey &id) const {
  return absl::StrCat(EntryDir(id), "/", ArtifactName());
}

bool Store::StillValid(const EntryKey &id, const FileIdentity &verified) const {
  CountOps(1);
  struct stat st;
  if (lstat(ArtifactPath(id).c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
      !(IdentityOf(st) == verified)) {
    return false;
  }
  return HasDoneRecord(id);
}

bool Store::HasDoneRecord(const EntryKey &id) const {
  CountOps(1);
  struct stat st;
  return lstat(absl::StrCat(EntryDir(id), "/", kDoneName).c_str(), &st) == 0;
}

absl::StatusOr<StoredEntry> Store::Find(const EntryKey &id,
                                        OnDamage on_damage) {
  const std::string dir = EntryDir(id);
  const std::string artifact = ArtifactPath(id);
  CountOps(2);  // open model.done, open the artifact
  absl::StatusOr<std::string> done_text =
      ReadSmallFile(absl::StrCat(dir, "/", kDoneName), kMaxDoneBytes);
  if (!done_text.ok()) {
    if (absl::IsNotFound(done_text.status())) {
      // The common miss (nothing there yet) costs one more stat; only an
      // artifact without a marker needs a listing of the directory.
      struct stat st;
      CountOps(1);
      if (lstat(artifact.c_str(), &st) != 0) {
        return absl::NotFoundError(absl::StrCat("no entry ", id.Canonical()));
      }
      // An artifact without its marker is adopted or moved aside only by
      // callers that may quarantine.
      if (on_damage == OnDamage::kReport) {
        return absl::NotFoundError(absl::StrCat("no entry ", id.Canonical()));
      }
      EntryState state = Inspect(id);
      if (state.has_artifact && state.legacy_inputs &&
          state.lock_files.empty()) {
        return AdoptLegacy(id);
      }
      QuarantineOrphan(id, options_.orphan_grace);
      return absl::NotFoundError(absl::StrCat("no entry ", id.Canonical()));
    }
    return done_text.status();
  }
  UniqueFd fd(open(artifact.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) {
    if (errno != ENOENT)
      return absl::ErrnoToStatus(errno, "opening " + artifact);
    return Damaged(id, "model.done present but the artifact is missing",
                   on_damage);
  }
  struct stat before;
  if (fstat(fd.get(), &before) != 0) {
    return absl::ErrnoToStatus(errno, "stat " + artifact);
  }
  if (!S_ISREG(before.st_mode)) {
    return Damaged(id, "the artifact is not a regular file", on_damage);
  }

  // libneuronxla writes an empty model.done: such legacy entries are trusted
  // for their size and hashed on first serve.
  v1::DoneRecord done;
  const bool legacy = done_text->empty();
  if (!legacy) {
    absl::StatusOr<v1::DoneRecord> parsed = ParseDoneRecord(*done_text);
    if (!parsed.ok()) {
      return Damaged(id, parsed.status().message(), on_damage);
    }
    done = *std::move(parsed);
    if (done.size() != static_cast<uint64_t>(before.st_size)) {
      return Damaged(id,
                     absl::StrFormat("artifact is %d bytes; model.done says %d",
                                     before.st_size, done.size()),
                     on_damage);
    }
  }
  absl::StatusOr<CopyResult> hashed = CopyAndHash(fd.get(), -1, artifact);
  if (!hashed.ok()) return hashed.status();
  struct stat after;
  if (fstat(fd.get(), &after) != 0) {
    return absl::ErrnoToStatus(errno, "stat " + artifact);
  }
  if (!(IdentityOf(before) == IdentityOf(after))) {
    return absl::UnavailableError(
        absl::StrCat(artifact, " changed while it was verified; retry"));
  }
  if (legacy) {
    done.set_size(hashed->size);
    done.set_sha256(hashed->sha256);
    done.set_compiler_version(id.compiler_version());
    done.set_key(id.key());
    done.set_publish_time_unix_ms(MtimeNs(before) / 1000000);
  } else if (hashed->sha256 != done.sha256()) {
    return Damaged(id,
                   absl::StrCat("artifact sha256 is ", hashed->sha256,
                                "; model.done says ", done.sha256()),
                   on_damage);
  }
  return StoredEntry{EntryFromDone(id, artifact, done), IdentityOf(before)};
}

absl::StatusOr<PublishResult> Store::PublishFromFd(
    const EntryKey &id, int fd, uint64_t size, const std::string &sha256,
    const Producer &producer, const std::map<std::string, std::string> &md,
    const std::function<void()> &verified) {
  return Publish(
      id, size, sha256, producer, md,
      [&](int out_fd) -> absl::StatusOr<std::pair<uint64_t, std::string>> {
        absl::StatusOr<CopyResult> copied =
            CopyAndHash(fd, out_fd, "staged file");
        if (!copied.ok()) return copied.status();
        return std::make_pair(copied->size, copied->sha256);
      },
      verified);
}

absl::StatusOr<PublishResult> Store::PublishBytes(
    const EntryKey &id, absl::string_view bytes, const std::string &sha256,
    const Producer &producer, const std::map<std::string, std::string> &md) {
  return Publish(
      id, bytes.size(), sha256, producer, md,
      [&](int out_fd) -> absl::StatusOr<std::pair<uint64_t, std::string>> {
        if (absl::Status s = WriteAll(out_fd, bytes, "entry"); !s.ok()) {
          return s;
        }
        return std::make_pair(uint64_t{bytes.size()}, Sha256Hex(bytes));
      },
      nullptr);
}

absl::StatusOr<PublishResult> Store::Publish(
    const EntryKey &id, uint64_t size, const std::string &sha256,
    const Producer &producer, const std::map<std::string, std::string> &md,
    const std::function<
        absl::StatusOr<std::pair<uint64_t, std::string>>(int out_fd)> &write,
    const std::function<void()> &verified) {
  absl::StatusOr<StoredEntry> existing = Find(id);
  if (existing.ok()) return PublishResult{*std::move(existing), true};
  if (!absl::IsNotFound(existing.status())) return existing.status();
  // The publisher holds the entry's lease: whatever artifact is there
  // without model.done is an interrupted publish, not one in flight.
  QuarantineOrphan(id, absl::ZeroDuration());

  const std::string dir = EntryDir(id);
  CountOps(5);  // mkdir, create temp, rename, create/rename model.done
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  const std::string tmp =
      absl::StrCat(dir, "/", UniqueTempName(ArtifactName(), options_.host_id));
  UniqueFd out(open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!out.valid()) return absl::ErrnoToStatus(errno, "creating " + tmp);
  auto fail = [&](absl::Status status) {
    unlink(tmp.c_str());
    return status;
  };
  absl::StatusOr<std::pair<uint64_t, std::string>> written = write(out.get());
  if (!written.ok()) return fail(written.status());
  if (written->first != size) {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("size: content is %d bytes; the request says %d",
                        written->first, size)));
  }
  if (written->second != sha256) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("sha256: content hashes to ", written->second,
                     "; the request says ", sha256)));
  }
  if (verified) verified();
  // The one fsync a publish needs (see PublishFromFd): a done record must
  // never name a torn artifact.
  if (fsync(out.get()) != 0)
    return fail(absl::ErrnoToStatus(errno, "fsync " + tmp));
  const std::string artifact = ArtifactPath(id);
  if (rename(tmp.c_str(), artifact.c_str()) != 0) {
    return fail(absl::ErrnoToStatus(errno, "renaming to " + artifact));
  }
  struct stat st;  // after the rename, which changes ctime
  if (fstat(out.get(), &st) != 0)
    return absl::ErrnoToStatus(errno, "stat " + artifact);

  v1::DoneRecord done;
  done.set_size(size);
  done.set_sha256(sha256);
  done.set_producer_host(producer.host);
  done.set_producer_pid(producer.pid);
  done.set_publish_time_unix_ms(absl::ToUnixMillis(options_.now()));
  done.set_compiler_version(id.compiler_version());
  done.set_key(id.key());
  done.mutable_metadata()->insert(md.begin(), md.end());
  // Before model.done, so a complete entry always has it; not durable, like
  // model.done (losing it loses only an explanation).
  if (auto inputs = md.find(kKeyInputsMetadata); inputs != md.end()) {
    if (absl::Status s =
            WriteFileAtomically(dir, kKeyInputsFileName, inputs->second,
                                options_.host_id, /*durable=*/false);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = WriteDone(id, done); !s.ok()) return s;
  unlink(absl::StrCat(dir, "/", kLogName).c_str());
  return PublishResult{
      StoredEntry{EntryFromDone(id, artifact, done), IdentityOf(st)}, false};
}

absl::StatusOr<StoredEntry> Store::AdoptLegacy(const EntryKey &id) {
  const std::string artifact = ArtifactPath(id);
  CountOps(2);
  UniqueFd fd(open(artifact.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, "opening " + artifact);
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return absl::NotFoundError(absl::StrCat(artifact, " is not a file"));
  }
  absl::StatusOr<CopyResult> hashed = CopyAndHash(fd.get(), -1, artifact);
  if (!hashed.ok()) return hashed.status();
  v1::DoneRecord done;
  done.set_size(hashed->size);
  done.set_sha256(hashed->sha256);
  done.set_producer_host("legacy");
  done.set_publish_time_unix_ms(MtimeNs(st) / 1000000);
  done.set_compiler_version(id.compiler_version());
  done.set_key(id.key());
  if (absl::Status s = WriteDone(id, done); !s.ok()) return s;
  return StoredEntry{EntryFromDone(id, artifact, done), IdentityOf(st)};
}

absl::Status Store::WriteDone(const EntryKey &id, const v1::DoneRecord &done) {
  absl::StatusOr<std::string> json = DoneRecordToJson(done);
  if (!json.ok()) return json.status();
  // Not durable on purpose (PublishFromFd): losing it costs a recompile.
  return WriteFileAtomically(EntryDir(id), kDoneName, *json, options_.host_id,
                             /*durable=*/false);
}

absl::StatusOr<v1::Failure> Store::RecordFailure(const EntryKey &id,
                                                 absl::string_view log) {
  const std::string dir = EntryDir(id);
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  if (log.size() > kMaxLogBytes) log = log.substr(log.size() - kMaxLogBytes);
  if (absl::Status s =
          WriteFileAtomically(dir, kLogName, log, options_.host_id);
      !s.ok()) {
    return s;
  }
  // Callers and later lookups must see the same retry-after: both derive
  // it from the log's mtime.
  std::optional<v1::Failure> failure = FindFailure(id);
  if (!failure.has_value()) {
    return absl::InternalError(
        absl::StrCat("recorded failure for ", id.Canonical(), " not found"));
  }
  return *failure;
}

std::optional<v1::Failure> Store::FindFailure(const EntryKey &id) const {
  const std::string path = absl::StrCat(EntryDir(id), "/", kLogName);
  CountOps(1);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    return std::nullopt;
  }
  absl::Time retry_after =
      absl::FromUnixNanos(MtimeNs(st)) + options_.failed_ttl;
  if (retry_after <= options_.now()) return std::nullopt;
  v1::Failure failure;
  failure.set_retry_after_unix_ms(absl::ToUnixMillis(retry_after));
  absl::StatusOr<std::string> log = ReadSmallFile(path, kMaxLogBytes);
  failure.set_log(log.ok() ? *log : "(log unreadable)");
  return failure;
}

std::string Store::QuarantineTarget(const EntryKey &id) const {
  return absl::StrCat(
      options_.root, "/quarantine/",
      UniqueTempName(absl::StrCat(id.compiler_version(), "__", id.key()),
                     options_.host_id)
          .substr(1));
}

void Store::QuarantineOrphan(const EntryKey &id, absl::Duration grace) {
  struct stat st;
  CountOps(1);
  if (lstat(ArtifactPath(id).c_str(), &st) != 0) return;
  if (grace > absl::ZeroDuration()) {
    struct stat lease;
    CountOps(1);
    if (lstat(absl::StrCat(EntryDir(id), "/", kLeaseFileName).c_str(),
              &lease) == 0 ||
        options_.now() - absl::TimeFromTimespec(st.st_mtim) < grace) {
      return;
    }
  }
  // Only the artifact moves: the directory may hold the caller's lease file.
  const std::string qdir = absl::StrCat(options_.root, "/quarantine");
  const std::string target = QuarantineTarget(id);
  CountOps(3);
  if (!MakeDirs(qdir).ok() ||
      rename(ArtifactPath(id).c_str(), target.c_str()) != 0) {
    return;
  }
  (void)WriteFileAtomically(
      qdir, absl::StrCat(target.substr(qdir.size() + 1), ".reason"),
      "artifact without model.done (interrupted publish)\n", options_.host_id);
}

absl::Status Store::Damaged(const EntryKey &id, absl::string_view reason,
                            OnDamage on_damage) {
  if (on_damage == OnDamage::kReport) {
    return absl::DataLossError(absl::StrCat(id.Canonical(), ": ", reason));
  }
  (void)Quarantine(id, reason);
  return absl::NotFoundError(absl::StrCat("no entry ", id.Canonical()));
}

absl::StatusOr<std::string> Store::Quarantine(const EntryKey &id,
                                              absl::string_view reason) {
  const std::string qdir = absl::StrCat(options_.root, "/quarantine");
  CountOps(3);
  if (absl::Status s = MakeDirs(qdir); !s.ok()) return s;
  const std::string target = QuarantineTarget(id);
  if (rename(EntryDir(id).c_str(), target.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, "quarantining " + EntryDir(id));
  }
  (void)WriteFileAtomically(target, "reason", absl::StrCat(reason, "\n"),
                            options_.host_id);
  ++quarantined_;
  if (options_.on_event) {
    options_.on_event({"entry_quarantined",
                       {{"entry", id.Canonical()},
                        {"reason", std::string(reason)},
                        {"moved_to", target}}});
  }
  return target;
}

}  // namespace neffd
