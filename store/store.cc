#include "store/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

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

FileIdentity IdentityOf(const struct stat &st) {
  return FileIdentity{static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_size), MtimeNs(st),
                      static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 +
                          st.st_ctim.tv_nsec};
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(
    const StoreOptions &options) {
  if (options.root.empty() || options.root[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat(
        "cache root '", options.root, "' must be an absolute path"));
  }
  if (absl::Status s = MakeGroupDirs(options.root, kSharedDirMode, options.env);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = options.env->Access(options.root, W_OK | X_OK);
      !s.ok()) {
    return absl::Status(
        s.code(),
        absl::StrCat("cache root ", options.root,
                     " is not writable by this process: ", s.message()));
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
  return PathsOf(id).artifact();
}

EntryPaths Store::PathsOf(const EntryKey &id) const {
  const std::string dir = EntryDir(id);
  return EntryPaths{
      dir,      std::string(ArtifactName()), dir,           kDoneName,
      kLogName, kKeyInputsFileName,          kLeaseFileName};
}

bool Store::StillValid(const EntryKey &id, const FileIdentity &verified) const {
  struct stat st;
  if (!env_.Lstat(ArtifactPath(id), &st).ok() || !S_ISREG(st.st_mode) ||
      !(IdentityOf(st) == verified)) {
    return false;
  }
  return HasDoneRecord(id);
}

bool Store::HasDoneRecord(const EntryKey &id) const {
  struct stat st;
  return env_.Lstat(PathsOf(id).done(), &st).ok() &&
         S_ISREG(st.st_mode);  // a planted FIFO or directory is no record
}

absl::StatusOr<StoredEntry> Store::Find(const EntryKey &id,
                                        OnDamage on_damage) {
  const EntryPaths paths = PathsOf(id);
  const std::string artifact = paths.artifact();
  absl::StatusOr<std::string> done_text =
      ReadSmallFile(paths.done(), kMaxDoneBytes, &env_);
  if (!done_text.ok()) {
    if (absl::IsNotFound(done_text.status())) {
      // The common miss (nothing there yet) costs one more stat; only an
      // artifact without a marker needs a listing of the directory.
      struct stat st;
      if (!env_.Lstat(artifact, &st).ok()) {
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
    if (IsDamage(done_text.status())) {
      return Damaged(id, done_text.status().message(), on_damage);
    }
    return done_text.status();
  }
  absl::StatusOr<RegularFile> opened =
      OpenRegularFile(artifact, options_.max_artifact_bytes, &env_);
  if (!opened.ok()) {
    if (IsDamage(opened.status())) {
      return Damaged(id, opened.status().message(), on_damage);
    }
    if (!absl::IsNotFound(opened.status())) return opened.status();
    return Damaged(id, "model.done present but the artifact is missing",
                   on_damage);
  }
  UniqueFd *const fd = &opened->fd;
  const struct stat before = opened->st;

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
  absl::StatusOr<CopyResult> hashed = CopyAndHash(fd->get(), -1, artifact);
  if (!hashed.ok()) return hashed.status();
  struct stat after;
  if (absl::Status s = env_.Fstat(fd->get(), artifact, &after); !s.ok()) {
    return s;
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
      [&](int out_fd, absl::string_view out_name)
          -> absl::StatusOr<std::pair<uint64_t, std::string>> {
        absl::StatusOr<CopyResult> copied =
            CopyAndHash(fd, out_fd, "staged file", {&env_, out_name});
        if (!copied.ok()) return copied.status();
        return std::make_pair(copied->size, copied->sha256);
      },
      verified);
}

absl::StatusOr<PublishResult> Store::PublishBytes(
    const EntryKey &id, absl::string_view bytes, const std::string &sha256,
    const Producer &producer, const std::map<std::string, std::string> &md,
    const std::function<void()> &verified) {
  return Publish(
      id, bytes.size(), sha256, producer, md,
      [&](int out_fd, absl::string_view out_name)
          -> absl::StatusOr<std::pair<uint64_t, std::string>> {
        if (absl::Status s = env_.Write(out_fd, out_name, bytes); !s.ok()) {
          return s;
        }
        Sha256 hash;
        hash.Update(bytes.data(), bytes.size());
        absl::StatusOr<std::string> digest = hash.HexDigest();
        if (!digest.ok()) return digest.status();
        return std::make_pair(uint64_t{bytes.size()}, *std::move(digest));
      },
      verified);
}

absl::StatusOr<PublishResult> Store::Publish(
    const EntryKey &id, uint64_t size, const std::string &sha256,
    const Producer &producer, const std::map<std::string, std::string> &md,
    const std::function<absl::StatusOr<std::pair<uint64_t, std::string>>(
        int out_fd, absl::string_view out_name)> &write,
    const std::function<void()> &verified) {
  absl::StatusOr<StoredEntry> existing = Find(id);
  if (existing.ok()) return PublishResult{*std::move(existing), true};
  if (!absl::IsNotFound(existing.status())) return existing.status();
  // The publisher holds the entry's lease: whatever artifact is there
  // without model.done is an interrupted publish, not one in flight.
  QuarantineOrphan(id, absl::ZeroDuration());
  QuarantinePlanted(id);

  // The durability order (store.h, PublishFromFd): a created directory's
  // name is synced in its parent first, the artifact's data before it is
  // renamed into place, its name (and the key inputs') before model.done is
  // written, model.done's data before its rename, and that name last.
  const EntryPaths paths = PathsOf(id);
  // One directory in libneuronxla's layout, two in TorchNeuron's.
  std::vector<std::string> dirs = {paths.artifact_dir};
  if (paths.records_dir != paths.artifact_dir) {
    dirs.push_back(paths.records_dir);
  }
  for (const std::string &dir : dirs) {
    if (absl::Status s =
            MakeGroupDirs(dir, kSharedDirMode, &env_, /*durably=*/true);
        !s.ok()) {
      return s;
    }
  }
  const std::string tmp =
      absl::StrCat(paths.artifact_dir, "/",
                   UniqueTempName(paths.artifact_name, options_.host_id));
  absl::StatusOr<UniqueFd> out =
      env_.Open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
  if (!out.ok()) return out.status();
  auto fail = [&](absl::Status status) {
    (void)env_.Unlink(tmp);
    return status;
  };
  absl::StatusOr<std::pair<uint64_t, std::string>> written =
      write(out->get(), tmp);
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
  if (absl::Status s = env_.Sync(out->get(), tmp); !s.ok()) return fail(s);
  const std::string artifact = paths.artifact();
  if (absl::Status s = env_.Rename(tmp, artifact); !s.ok()) return fail(s);
  struct stat st;  // after the rename, which changes ctime
  if (absl::Status s = env_.Fstat(out->get(), artifact, &st); !s.ok()) {
    return s;
  }

  v1::DoneRecord done;
  done.set_size(size);
  done.set_sha256(sha256);
  done.set_producer_host(producer.host);
  done.set_producer_pid(producer.pid);
  done.set_publish_time_unix_ms(absl::ToUnixMillis(env_.Now()));
  done.set_compiler_version(id.compiler_version());
  done.set_key(id.key());
  done.mutable_metadata()->insert(md.begin(), md.end());
  // The key inputs go before model.done, so a complete entry always has
  // them. Their write ends with the directory's fsync, which makes the
  // artifact's name durable too; without them the directory is synced on
  // its own. Only then may model.done name the artifact.
  absl::Status finished;
  // Where the artifact is not beside its records (TorchNeuron's layout), its
  // name is synced in its own directory.
  if (paths.artifact_dir != paths.records_dir) {
    finished = env_.SyncDir(paths.artifact_dir);
  }
  if (finished.ok()) {
    auto inputs = md.find(kKeyInputsMetadata);
    finished =
        inputs != md.end()
            ? WriteFileAtomically(paths.records_dir, paths.key_inputs_name,
                                  inputs->second, options_.host_id,
                                  /*durable=*/true, &env_)
            : env_.SyncDir(paths.records_dir);
  }
  if (finished.ok()) finished = WriteDone(id, done);
  if (!finished.ok()) {
    // Without its marker the artifact is a miss that the next publish would
    // move to quarantine; it is this publisher's (it holds the lease), so
    // remove it now and give a full disk its space back. A marker renamed
    // in whose directory could not be synced goes first: the caller hears
    // of a failure, so nothing may stay that looks published.
    (void)env_.Unlink(paths.done());
    (void)env_.Unlink(artifact);
    return finished;
  }
  (void)env_.Unlink(paths.log());
  return PublishResult{
      StoredEntry{EntryFromDone(id, artifact, done), IdentityOf(st)}, false};
}

absl::StatusOr<StoredEntry> Store::AdoptLegacy(const EntryKey &id) {
  const std::string artifact = ArtifactPath(id);
  absl::StatusOr<RegularFile> opened =
      OpenRegularFile(artifact, options_.max_artifact_bytes, &env_);
  if (!opened.ok()) {
    if (!IsDamage(opened.status())) return opened.status();
    return Damaged(id, opened.status().message(), OnDamage::kQuarantine);
  }
  const struct stat st = opened->st;
  absl::StatusOr<CopyResult> hashed =
      CopyAndHash(opened->fd.get(), -1, artifact);
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
  // Data fsynced before the rename, the directory after it: once this
  // returns the entry survives a power loss (PublishFromFd).
  const EntryPaths paths = PathsOf(id);
  return WriteFileAtomically(paths.records_dir, paths.done_name, *json,
                             options_.host_id, /*durable=*/true, &env_);
}

absl::StatusOr<v1::Failure> Store::RecordFailure(const EntryKey &id,
                                                 absl::string_view log) {
  const EntryPaths paths = PathsOf(id);
  if (absl::Status s = MakeGroupDirs(paths.records_dir, kSharedDirMode, &env_);
      !s.ok())
    return s;
  if (log.size() > kMaxLogBytes) log = log.substr(log.size() - kMaxLogBytes);
  if (absl::Status s =
          WriteFileAtomically(paths.records_dir, paths.log_name, log,
                              options_.host_id, /*durable=*/true, &env_);
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
  const std::string path = PathsOf(id).log();
  struct stat st;
  if (!env_.Lstat(path, &st).ok() || !S_ISREG(st.st_mode)) {
    return std::nullopt;
  }
  absl::Time retry_after =
      absl::FromUnixNanos(MtimeNs(st)) + options_.failed_ttl;
  if (retry_after <= env_.Now()) return std::nullopt;
  v1::Failure failure;
  failure.set_retry_after_unix_ms(absl::ToUnixMillis(retry_after));
  absl::StatusOr<std::string> log = ReadSmallFile(path, kMaxLogBytes, &env_);
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
  if (!env_.Lstat(ArtifactPath(id), &st).ok()) return;
  if (grace > absl::ZeroDuration()) {
    struct stat lease;
    const EntryPaths paths = PathsOf(id);
    for (const std::string &path :
         {paths.lease(),
          absl::StrCat(paths.records_dir, "/", kLegacyLeaseFileName)}) {
      if (env_.Lstat(path, &lease).ok()) return;
    }
    if (env_.Now() - absl::TimeFromTimespec(st.st_mtim) < grace) return;
  }
  // Only the artifact moves: the directory may hold the caller's lease file.
  (void)MoveFileToQuarantine(
      id, ArtifactPath(id),
      "artifact without model.done (interrupted publish)");
}

absl::StatusOr<std::string> Store::MoveFileToQuarantine(
    const EntryKey &id, const std::string &path, absl::string_view reason) {
  return MoveToQuarantine(absl::StrCat(options_.root, "/quarantine"), path,
                          absl::StrCat(id.compiler_version(), "__", id.key()),
                          reason, options_.host_id, &env_);
}

void Store::QuarantinePlanted(const EntryKey &id) {
  const EntryPaths paths = PathsOf(id);
  for (absl::string_view name : {paths.key_inputs_name, paths.log_name}) {
    const std::string path = absl::StrCat(paths.records_dir, "/", name);
    struct stat st;
    if (!env_.Lstat(path, &st).ok() || S_ISREG(st.st_mode)) continue;
    const std::string reason =
        absl::StrCat(name, " is ", FileTypeName(st.st_mode));
    absl::StatusOr<std::string> target = MoveFileToQuarantine(id, path, reason);
    if (!target.ok()) continue;
    ++quarantined_;
    if (options_.on_event) {
      options_.on_event({"entry_quarantined",
                         {{"entry", id.Canonical()},
                          {"reason", reason},
                          {"moved_to", *target}}});
    }
  }
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
  if (absl::Status s = MakeGroupDirs(qdir, kSharedDirMode, &env_); !s.ok())
    return s;
  const std::string target = QuarantineTarget(id);
  if (absl::Status s = env_.Rename(EntryDir(id), target); !s.ok()) return s;
  (void)WriteFileAtomically(target, "reason", absl::StrCat(reason, "\n"),
                            options_.host_id, /*durable=*/true, &env_);
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
