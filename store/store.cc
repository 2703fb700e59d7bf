#include "store/store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/digest.h"
#include "store/done_record.h"
#include "store/file_util.h"
#include "store/layout.h"

namespace neffd {
namespace {

constexpr char kDoneName[] = "model.done";
constexpr char kLogName[] = "model.log";
constexpr size_t kMaxDoneBytes = 1 << 20;
constexpr size_t kMaxLogBytes = 1 << 20;
// model.done's producer_host for an artifact neffd did not publish.
constexpr char kAdoptedProducer[] = "adopted";

int64_t MtimeNs(const struct stat& st) {
  return static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 +
         st.st_mtim.tv_nsec;
}

v1::Entry EntryFromDone(const EntryKey& id, const std::string& path,
                        const v1::DoneRecord& done) {
  v1::Entry entry;
  *entry.mutable_id() = id.ToProto();
  // A lookup for any version answers with the version the entry has.
  if (id.compiler_version().empty()) {
    entry.mutable_id()->set_compiler_version(done.compiler_version());
  }
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

FileIdentity IdentityOf(const struct stat& st) {
  return FileIdentity{static_cast<uint64_t>(st.st_ino),
                      static_cast<uint64_t>(st.st_size), MtimeNs(st),
                      static_cast<int64_t>(st.st_ctim.tv_sec) * 1000000000 +
                          st.st_ctim.tv_nsec};
}

absl::StatusOr<std::unique_ptr<Store>> Store::Open(
    const StoreOptions& options) {
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

std::string Store::RecordsDir(const EntryKey& id) const {
  return absl::StrCat(options_.root, "/", RecordsRelDir(id.key()));
}

std::string Store::ArtifactPath(const EntryKey& id) const {
  return absl::StrCat(options_.root, "/",
                      ArtifactRelPath(options_.ns, id.key()));
}

EntryPaths Store::PathsOf(const EntryKey& id) const {
  return EntryPaths{absl::StrCat(options_.root, "/", ShardDir(id.key())),
                    absl::StrCat(id.key(), ArtifactExtension(options_.ns)),
                    RecordsDir(id),
                    kDoneName,
                    kLogName,
                    kKeyInputsFileName,
                    kLeaseFileName};
}

bool Store::StillValid(const EntryKey& id, const FileIdentity& verified) const {
  struct stat st;
  if (!env_.Lstat(ArtifactPath(id), &st).ok() || !S_ISREG(st.st_mode) ||
      !(IdentityOf(st) == verified)) {
    return false;
  }
  return HasDoneRecord(id);
}

bool Store::HasDoneRecord(const EntryKey& id) const {
  struct stat st;
  return env_.Lstat(PathsOf(id).done(), &st).ok() &&
         S_ISREG(st.st_mode);  // a planted FIFO or directory is no record
}

absl::StatusOr<StoredEntry> Store::Find(const EntryKey& id,
                                        OnDamage on_damage) {
  const EntryPaths paths = PathsOf(id);
  const std::string artifact = paths.artifact();
  auto miss = [&id](absl::string_view why = "") {
    return absl::NotFoundError(absl::StrCat("no entry ", id.Canonical(), why));
  };
  // The artifact first: for a key never compiled, and after TorchNeuron's
  // clear, this one open is the whole miss.
  absl::StatusOr<RegularFile> opened =
      OpenRegularFile(artifact, options_.max_artifact_bytes, &env_);
  if (absl::IsNotFound(opened.status())) return miss();
  if (!opened.ok() && !IsDamage(opened.status())) return opened.status();
  ArtifactSeen seen;
  seen.exists = true;
  if (opened.ok()) {
    seen.regular = true;
    seen.size = opened->st.st_size;
    seen.inode = opened->st.st_ino;
  }
  if (seen.regular && seen.size == 0) return miss();  // as for TorchNeuron
  // What a quarantine may move: the file judged, not one renamed in since.
  const std::optional<ino_t> judged =
      seen.regular ? std::optional<ino_t>(seen.inode) : std::nullopt;

  std::optional<v1::DoneRecord> done;
  absl::StatusOr<std::string> done_text =
      ReadSmallFile(paths.done(), kMaxDoneBytes, &env_);
  // An empty model.done (libneuronxla's marker) records nothing.
  if (done_text.ok() && !done_text->empty()) {
    absl::StatusOr<v1::DoneRecord> parsed = ParseDoneRecord(*done_text);
    if (!parsed.ok()) {
      return Damaged(id, parsed.status().message(), on_damage, judged);
    }
    done = *std::move(parsed);
  } else if (IsDamage(done_text.status())) {
    return Damaged(id, done_text.status().message(), on_damage, judged);
  } else if (!done_text.ok() && !absl::IsNotFound(done_text.status())) {
    return done_text.status();
  }
  const Judgement judgement =
      JudgeEntry(options_.ns, id.key(), seen, done ? &*done : nullptr,
                 id.compiler_version());
  switch (judgement.verdict) {
    case Verdict::kMiss:
      return miss();
    case Verdict::kCleared:  // TorchNeuron's clear: gc removes the records
      return miss();
    case Verdict::kVersionMismatch:
      return miss(absl::StrCat(" (recorded for compiler version ",
                               done->compiler_version(), ")"));
    case Verdict::kDamage:
      return Damaged(
          id, seen.regular ? judgement.reason : opened.status().message(),
          on_damage, judged);
    case Verdict::kAdopt:
      return HashAndCheck(id, *opened, nullptr, on_damage);
    case Verdict::kVerify:
      return HashAndCheck(id, *opened, &*done, on_damage);
  }
  return miss();
}

absl::StatusOr<StoredEntry> Store::HashAndCheck(const EntryKey& id,
                                                RegularFile& artifact,
                                                const v1::DoneRecord* done,
                                                OnDamage on_damage) {
  const EntryPaths paths = PathsOf(id);
  const std::string path = paths.artifact();
  const struct stat before = artifact.st;
  absl::StatusOr<CopyResult> hashed = CopyAndHash(artifact.fd.get(), -1, path);
  if (!hashed.ok()) return hashed.status();
  struct stat after;
  if (absl::Status s = env_.Fstat(artifact.fd.get(), path, &after); !s.ok()) {
    return s;
  }
  if (!(IdentityOf(before) == IdentityOf(after))) {
    // Renamed into quarantine by another checker (a rename changes the
    // ctime), or rewritten: a miss, which the caller's lock resolves.
    return absl::NotFoundError(absl::StrCat("no entry ", id.Canonical(), " (",
                                            paths.artifact_name,
                                            " changed while it was verified)"));
  }
  if (done != nullptr) {
    if (hashed->sha256 != done->sha256()) {
      return Damaged(
          id,
          absl::StrCat(paths.artifact_name, " sha256 is ", hashed->sha256,
                       "; model.done says ", done->sha256()),
          on_damage, before.st_ino);
    }
    return StoredEntry{EntryFromDone(id, path, *done), IdentityOf(before),
                       false};
  }
  // An artifact no record describes: an unmodified rank's put, or a publish
  // whose verified bytes were renamed in before a crash. Its bytes are what
  // its key names, as far as anyone can know: record them now, so the next
  // lookup verifies instead of adopting.
  v1::DoneRecord adopted;
  adopted.set_size(hashed->size);
  adopted.set_sha256(hashed->sha256);
  adopted.set_producer_host(kAdoptedProducer);
  adopted.set_publish_time_unix_ms(MtimeNs(before) / 1000000);
  adopted.set_compiler_version(id.compiler_version());
  adopted.set_key(id.key());
  adopted.set_artifact_inode(before.st_ino);
  struct stat lease;
  // A lease out means a publish may be writing its own record (with its
  // producer and key inputs) right now: serve, but leave recording to it.
  const bool publishing = env_.Lstat(paths.lease(), &lease).ok();
  bool recorded = false;
  if (on_damage == OnDamage::kQuarantine && !publishing) {
    // Unrecorded (no permission, a full disk): adopted again next time.
    recorded = MakeGroupDirs(paths.records_dir, kSharedDirMode, &env_).ok() &&
               WriteDone(id, adopted).ok();
  }
  return StoredEntry{EntryFromDone(id, path, adopted), IdentityOf(before),
                     recorded};
}

absl::StatusOr<PublishResult> Store::PublishFromFd(
    const EntryKey& id, int fd, uint64_t size, const std::string& sha256,
    const Producer& producer, const std::map<std::string, std::string>& md,
    const Verified& verified) {
  return PublishWritten(
      id, size, sha256, producer, md,
      [&](int out_fd, absl::string_view out_name) {
        return CopyAndHash(fd, out_fd, "staged file",
                           {&env_, out_name, /*sync_out_behind=*/true});
      },
      verified);
}

absl::StatusOr<PublishResult> Store::PublishBytes(
    const EntryKey& id, absl::string_view bytes, const std::string& sha256,
    const Producer& producer, const std::map<std::string, std::string>& md,
    const Verified& verified) {
  return PublishWritten(
      id, bytes.size(), sha256, producer, md,
      [&](int out_fd,
          absl::string_view out_name) -> absl::StatusOr<CopyResult> {
        if (absl::Status s = env_.Write(out_fd, out_name, bytes); !s.ok()) {
          return s;
        }
        Sha256 hash;
        hash.Update(bytes.data(), bytes.size());
        absl::StatusOr<std::string> digest = hash.HexDigest();
        if (!digest.ok()) return digest.status();
        return CopyResult{bytes.size(), *std::move(digest)};
      },
      verified);
}

absl::StatusOr<PublishResult> Store::PublishWritten(
    const EntryKey& id, uint64_t size, const std::string& sha256,
    const Producer& producer, const std::map<std::string, std::string>& md,
    const ContentWriter& write, const Verified& verified) {
  absl::StatusOr<StoredEntry> existing = Find(id);
  if (existing.ok()) return PublishResult{*std::move(existing), true};
  if (!absl::IsNotFound(existing.status())) return existing.status();
  QuarantinePlanted(id);

  // The durability order (store.h, PublishFromFd): a created directory's
  // name is synced in its parent first, the artifact's data before it is
  // renamed into place, its name (and the key inputs') before model.done is
  // written, model.done's data before its rename, and that name last. The
  // records directory is made first, so a crash that leaves a temp file
  // leaves a name gc finds it by.
  const EntryPaths paths = PathsOf(id);
  for (const std::string& dir : {paths.records_dir}) {
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
  absl::StatusOr<CopyResult> written = write(out->get(), tmp);
  if (!written.ok()) return fail(written.status());
  if (written->size != size) {
    return fail(absl::InvalidArgumentError(
        absl::StrFormat("size: content is %d bytes; the request says %d",
                        written->size, size)));
  }
  if (!sha256.empty() && written->sha256 != sha256) {
    return fail(absl::InvalidArgumentError(
        absl::StrCat("sha256: content hashes to ", written->sha256,
                     "; the request says ", sha256)));
  }
  if (verified) verified(*written);
  if (absl::Status s = env_.Sync(out->get(), tmp); !s.ok()) return fail(s);
  const std::string artifact = paths.artifact();
  if (absl::Status s = env_.Rename(tmp, artifact); !s.ok()) return fail(s);
  struct stat st;  // after the rename, which changes ctime
  if (absl::Status s = env_.Fstat(out->get(), artifact, &st); !s.ok()) {
    return s;
  }

  v1::DoneRecord done;
  done.set_size(size);
  done.set_sha256(written->sha256);
  done.set_producer_host(producer.host);
  done.set_producer_pid(producer.pid);
  done.set_publish_time_unix_ms(absl::ToUnixMillis(env_.Now()));
  done.set_compiler_version(id.compiler_version());
  done.set_key(id.key());
  done.set_artifact_inode(st.st_ino);
  done.mutable_metadata()->insert(md.begin(), md.end());
  // The artifact's name is durable before model.done may name it; the key
  // inputs go before model.done, so a complete entry always has them.
  absl::Status finished = env_.SyncDir(paths.artifact_dir);
  if (finished.ok()) finished = SyncShardNames(paths.artifact_dir);
  auto inputs = md.find(kKeyInputsMetadata);
  if (finished.ok() && inputs != md.end()) {
    finished = WriteFileAtomically(paths.records_dir, paths.key_inputs_name,
                                   inputs->second, options_.host_id,
                                   /*durable=*/true, &env_);
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
      StoredEntry{EntryFromDone(id, artifact, done), IdentityOf(st), false},
      false};
}

absl::Status Store::SyncShardNames(const std::string& shard_dir) {
  {
    absl::MutexLock lock(&synced_shards_mu_);
    if (synced_shards_.contains(shard_dir)) return absl::OkStatus();
  }
  for (std::string dir = shard_dir; dir.size() > options_.root.size() &&
                                    absl::StartsWith(dir, options_.root);
       dir = dir.substr(0, dir.rfind('/'))) {
    if (absl::Status s = env_.SyncDir(dir.substr(0, dir.rfind('/'))); !s.ok()) {
      return s;
    }
  }
  absl::MutexLock lock(&synced_shards_mu_);
  if (synced_shards_.size() >= (1 << 16)) synced_shards_.clear();
  synced_shards_.insert(shard_dir);
  return absl::OkStatus();
}

absl::Status Store::WriteDone(const EntryKey& id, const v1::DoneRecord& done) {
  absl::StatusOr<std::string> json = DoneRecordToJson(done);
  if (!json.ok()) return json.status();
  // Data fsynced before the rename, the directory after it: once this
  // returns the entry survives a power loss (PublishFromFd).
  const EntryPaths paths = PathsOf(id);
  return WriteFileAtomically(paths.records_dir, paths.done_name, *json,
                             options_.host_id, /*durable=*/true, &env_);
}

absl::StatusOr<v1::Failure> Store::RecordFailure(const EntryKey& id,
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

std::optional<v1::Failure> Store::FindFailure(const EntryKey& id) const {
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

std::string Store::QuarantineTarget(const EntryKey& id) const {
  return absl::StrCat(options_.root, "/quarantine/",
                      UniqueTempName(id.key(), options_.host_id).substr(1));
}

absl::StatusOr<std::string> Store::MoveFileToQuarantine(
    const EntryKey& id, const std::string& path, absl::string_view reason) {
  return MoveToQuarantine(absl::StrCat(options_.root, "/quarantine"), path,
                          id.key(), reason, options_.host_id, &env_);
}

void Store::QuarantinePlanted(const EntryKey& id) {
  const EntryPaths paths = PathsOf(id);
  std::vector<std::pair<std::string, bool>> checked = {
      {paths.records_dir, /*dir=*/true},
      {paths.key_inputs(), false},
      {paths.log(), false}};
  for (const auto& [path, want_dir] : checked) {
    struct stat st;
    if (!env_.Lstat(path, &st).ok() ||
        (want_dir ? S_ISDIR(st.st_mode) : S_ISREG(st.st_mode))) {
      continue;
    }
    const std::string reason = absl::StrCat(path.substr(path.rfind('/') + 1),
                                            " is ", FileTypeName(st.st_mode));
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

absl::Status Store::Damaged(const EntryKey& id, absl::string_view reason,
                            OnDamage on_damage,
                            std::optional<ino_t> judged_inode) {
  if (on_damage == OnDamage::kReport) {
    return absl::DataLossError(absl::StrCat(id.Canonical(), ": ", reason));
  }
  (void)Quarantine(id, reason, judged_inode);
  return absl::NotFoundError(absl::StrCat("no entry ", id.Canonical()));
}

absl::StatusOr<std::string> Store::Quarantine(
    const EntryKey& id, absl::string_view reason,
    std::optional<ino_t> judged_inode) {
  const std::string qdir = absl::StrCat(options_.root, "/quarantine");
  if (absl::Status s = MakeGroupDirs(qdir, kSharedDirMode, &env_); !s.ok())
    return s;
  const std::string target = QuarantineTarget(id);
  if (absl::Status s = MakeGroupDirs(target, kSharedDirMode, &env_); !s.ok()) {
    return s;
  }
  const EntryPaths paths = PathsOf(id);
  const std::string moved_artifact =
      absl::StrCat(target, "/", paths.artifact_name);
  absl::Status moved = env_.Rename(paths.artifact(), moved_artifact);
  if (!moved.ok() && !absl::IsNotFound(moved)) return moved;
  if (!moved.ok() && judged_inode.has_value()) {
    // The artifact judged is gone: another host judged the same damage and
    // moved it first. That host files it, once; this one files nothing.
    (void)env_.Rmdir(target);
    return absl::FailedPreconditionError(
        absl::StrCat(id.Canonical(),
                     " was moved away since it was judged (by another "
                     "host's quarantine, or a removal)"));
  }
  const bool artifact_moved = moved.ok();
  struct stat st;
  if (moved.ok() && judged_inode.has_value() &&
      env_.Lstat(moved_artifact, &st).ok() && st.st_ino != *judged_inode) {
    // Two hosts judged the same damage; the other quarantined it and
    // republished before this rename. Its good artifact goes back unless a
    // still newer one is there (link never replaces), and its record stays.
    (void)env_.Link(moved_artifact, paths.artifact());
    (void)env_.Unlink(moved_artifact);
    (void)env_.Rmdir(target);
    return absl::FailedPreconditionError(
        absl::StrCat(id.Canonical(), " was replaced since it was judged"));
  }
  moved = env_.Rename(paths.done(), absl::StrCat(target, "/", paths.done_name));
  if (!moved.ok() && !absl::IsNotFound(moved)) return moved;
  if (!moved.ok() && !artifact_moved) {
    (void)env_.Rmdir(target);  // nothing left to file: filed elsewhere
    return absl::FailedPreconditionError(
        absl::StrCat(id.Canonical(), " has nothing left to quarantine"));
  }
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
