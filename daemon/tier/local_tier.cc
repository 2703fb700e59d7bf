#include "daemon/tier/local_tier.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "store/digest.h"
#include "store/file_util.h"

namespace neffd {
namespace {

// The daemon's own, read-only for it and the ranks' group.
constexpr int kTierFileMode = 0440;

// The shared store's copy a tier copy is made from, opened as a regular
// file within its recorded size.
absl::StatusOr<UniqueFd> OpenTierSource(const std::string& from,
                                        const v1::Entry& entry, Env* env) {
  absl::StatusOr<RegularFile> file = OpenRegularFile(from, entry.size(), env);
  if (!file.ok()) return file.status();
  return std::move(file->fd);
}

}  // namespace

struct LocalTier::Filling {
  absl::Notification done;
  absl::Status status;
};

class LocalTier::Arrival {
 public:
  Arrival(LocalTier* tier, std::string name)
      : tier_(tier), name_(std::move(name)) {
    absl::MutexLock lock(&tier_->mu_);
    ++tier_->arriving_[name_];
  }
  ~Arrival() {
    absl::MutexLock lock(&tier_->mu_);
    if (--tier_->arriving_[name_] == 0) tier_->arriving_.erase(name_);
  }
  Arrival(const Arrival&) = delete;
  Arrival& operator=(const Arrival&) = delete;

 private:
  LocalTier* const tier_;
  const std::string name_;
};

LocalTier::LocalTier(LocalTierOptions options) : options_(std::move(options)) {}

LocalTier::~LocalTier() { scanner_.Join(); }

absl::StatusOr<std::unique_ptr<LocalTier>> LocalTier::Open(
    LocalTierOptions options) {
  if (absl::Status s = MakeGroupDirs(options.dir, kTierDirMode, options.env);
      !s.ok()) {
    return s;
  }
  if (options.capacity_bytes == 0) {
    struct statvfs fs;
    if (absl::Status s = options.env->StatFs(options.dir, &fs); !s.ok()) {
      return s;
    }
    options.capacity_bytes =
        static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize / 5;
  }
  std::unique_ptr<LocalTier> tier(new LocalTier(std::move(options)));
  tier->scanner_ = tier->options_.env->StartThread(
      "neffd-tier-scan", [t = tier.get()] { t->Scan(""); });
  return tier;
}

std::string LocalTier::NameFor(const EntryKey& id,
                               const std::string& sha256) const {
  return absl::StrCat(NamespaceName(id.ns()), "/", id.compiler_version(), "/",
                      id.key(), ".", sha256);
}

v1::Entry LocalTier::Localized(const v1::Entry& entry,
                               const std::string& name) const {
  v1::Entry local = entry;
  local.set_path(absl::StrCat(options_.dir, "/", name));
  return local;
}

FileIdentity LocalTier::IdentityOf(const std::string& name) const {
  struct stat st;
  if (!options_.env->Lstat(absl::StrCat(options_.dir, "/", name), &st).ok()) {
    return FileIdentity{};
  }
  return ::neffd::IdentityOf(st);
}

std::optional<bool> LocalTier::Touch(const std::string& name) {
  FileIdentity recorded;
  {
    absl::MutexLock lock(&mu_);
    auto it = files_.find(name);
    if (it == files_.end()) return std::nullopt;
    MarkHandedOut(it->second);
    if (!it->second->verified) return false;
    recorded = it->second->identity;
  }
  // Outside the lock: one lstat per hand-out.
  if (IdentityOf(name) == recorded) return true;
  absl::MutexLock lock(&mu_);
  auto it = files_.find(name);
  if (it != files_.end()) it->second->verified = false;  // changed since hashed
  return false;
}

void LocalTier::Admit(const std::string& name, uint64_t size, bool handed_out,
                      bool verified) {
  const FileIdentity identity = verified ? IdentityOf(name) : FileIdentity{};
  absl::MutexLock lock(&mu_);
  if (auto it = files_.find(name); it != files_.end()) {
    // Known already (scanned, and hashed again before this hand-out).
    if (verified) {
      it->second->verified = true;
      it->second->identity = identity;
    }
    if (handed_out) MarkHandedOut(it->second);
    return;
  }
  const absl::Time when =
      handed_out ? options_.env->Now() : absl::InfinitePast();
  Insert(File{name, size, when, verified, identity});
}

void LocalTier::MarkHandedOut(std::list<File>::iterator file) {
  file->handed_out = options_.env->Now();
  lru_.splice(lru_.end(), lru_, file);
}

void LocalTier::Insert(File file) {
  // Never handed out: the first to go.
  auto at = file.handed_out == absl::InfinitePast() ? lru_.begin() : lru_.end();
  used_ += file.size;
  const std::string name = file.name;
  files_[name] = lru_.insert(at, std::move(file));
  EvictOverCapacity();
}

void LocalTier::AdmitScanned(const std::string& name) {
  // The lstat is under mu_ because Remove and Drop unlink under it: a file
  // removed while the scan ran is either admitted before (and the removal
  // then accounts for it) or not seen at all, never counted once it is gone.
  absl::MutexLock lock(&mu_);
  struct stat st;
  if (files_.contains(name) || arriving_.contains(name) ||
      !options_.env->Lstat(absl::StrCat(options_.dir, "/", name), &st).ok() ||
      !S_ISREG(st.st_mode)) {
    return;
  }
  Insert(File{name, static_cast<uint64_t>(st.st_size), absl::InfinitePast(),
              /*verified=*/false, FileIdentity{}});
}

void LocalTier::Drop(const std::string& name) {
  absl::MutexLock lock(&mu_);
  (void)options_.env->Unlink(absl::StrCat(options_.dir, "/", name));
  auto it = files_.find(name);
  if (it == files_.end()) return;
  used_ -= it->second->size;
  lru_.erase(it->second);
  files_.erase(it);
}

bool LocalTier::Matches(const std::string& name, const v1::Entry& entry) const {
  const std::string path = absl::StrCat(options_.dir, "/", name);
  absl::StatusOr<UniqueFd> fd = options_.env->Open(path, O_RDONLY | O_NOFOLLOW);
  if (!fd.ok()) return false;
  absl::StatusOr<CopyResult> hashed = CopyAndHash(fd->get(), -1, path);
  return hashed.ok() && hashed->size == entry.size() &&
         hashed->sha256 == entry.sha256();
}

void LocalTier::EvictOverCapacity() {
  const absl::Time now = options_.env->Now();
  while (used_ > options_.capacity_bytes && !lru_.empty()) {
    File& oldest = lru_.front();
    if (now - oldest.handed_out < options_.pin) break;  // all others newer
    (void)options_.env->Unlink(absl::StrCat(options_.dir, "/", oldest.name));
    used_ -= oldest.size;
    files_.erase(oldest.name);
    lru_.pop_front();
  }
}

absl::StatusOr<v1::Entry> LocalTier::Get(const EntryKey& id,
                                         const v1::Entry& entry,
                                         bool* from_shared) {
  if (from_shared != nullptr) *from_shared = false;
  const std::string name = NameFor(id, entry.sha256());
  std::optional<bool> known = Touch(name);
  if (known == true) return Localized(entry, name);
  // From before a restart (scanned, or not even that yet): complete when it
  // was named, but its data may not have reached the disk before a power
  // loss (adopted files are not fsynced), so it is hashed once before it is
  // handed out again.
  struct stat st;
  const std::string path = absl::StrCat(options_.dir, "/", name);
  if (known.has_value() ||
      (options_.env->Lstat(path, &st).ok() && S_ISREG(st.st_mode))) {
    if (Matches(name, entry)) {
      Admit(name, entry.size(), /*handed_out=*/true, /*verified=*/true);
      return Localized(entry, name);
    }
    Drop(name);
  }
  std::shared_ptr<Filling> filling;
  bool leader = false;
  bool filled_meanwhile = false;
  {
    absl::MutexLock lock(&mu_);
    auto known_now = files_.find(name);
    filled_meanwhile = known_now != files_.end() && known_now->second->verified;
    if (!filled_meanwhile) {
      std::shared_ptr<Filling>& slot = fills_[name];
      if (slot == nullptr) {
        slot = std::make_shared<Filling>();
        leader = true;
      }
      filling = slot;
    }
  }
  // A fill that ended between the Touch above and the lock has admitted the
  // file (Admit runs before a fill leaves fills_): filling again would copy
  // the shared bytes twice. It is handed out as any known file is.
  if (filled_meanwhile) return Get(id, entry, from_shared);
  if (leader) {
    {
      Arrival arrival(this, name);
      filling->status = Fill(name, entry);
      if (filling->status.ok()) {
        Admit(name, entry.size(), /*handed_out=*/true, /*verified=*/true);
      }
    }
    {
      absl::MutexLock lock(&mu_);
      fills_.erase(name);
    }
    filling->done.Notify();
  } else {
    filling->done.WaitForNotification();
    Touch(name);
  }
  if (!filling->status.ok()) return filling->status;
  if (from_shared != nullptr) *from_shared = true;
  return Localized(entry, name);
}

absl::Status LocalTier::Fill(const std::string& name, const v1::Entry& entry) {
  Env* const env = options_.env;
  const std::string& from = entry.path();
  // The shared copy must still be the verified regular file, or it is damage
  // (DataLoss: the caller re-checks it), never an open that blocks on a
  // planted FIFO.
  absl::StatusOr<UniqueFd> in = OpenTierSource(from, entry, env);
  if (!in.ok()) return in.status();
  const std::string path = absl::StrCat(options_.dir, "/", name);
  absl::StatusOr<TempCopy> copied = CopyToTemp(path, in->get(), from);
  if (!copied.ok()) return copied.status();
  filled_bytes_ += copied->content.size;
  absl::Status status;
  if (copied->content.size != entry.size() ||
      copied->content.sha256 != entry.sha256()) {
    status = absl::DataLossError(
        absl::StrCat(from, " no longer matches its sha256 (",
                     copied->content.sha256, " != ", entry.sha256(), ")"));
  } else {
    status = env->Rename(copied->tmp, path);
  }
  // No fsync, as for an adopted copy: a tier file from before a restart is
  // hashed again before it is handed out (Get), so a power loss costs a
  // refill, never a torn NEFF, while an fsync would cost the first rank of
  // each host one disk flush per entry.
  if (!status.ok()) (void)env->Unlink(copied->tmp);
  return status;
}

absl::StatusOr<LocalTier::TempCopy> LocalTier::CopyToTemp(
    const std::string& path, int in_fd, const std::string& from,
    const CopyTee& tee) {
  Env* const env = options_.env;
  const std::string dir = path.substr(0, path.rfind('/'));
  if (absl::Status s = MakeGroupDirs(dir, kTierDirMode, env); !s.ok()) {
    return s;
  }
  TempCopy copy;
  copy.tmp = absl::StrCat(
      dir, "/", UniqueTempName(path.substr(path.rfind('/') + 1), "tier"));
  absl::StatusOr<UniqueFd> out = env->Open(
      copy.tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, kTierFileMode);
  if (!out.ok()) return out.status();
  absl::StatusOr<CopyResult> copied =
      CopyAndHash(in_fd, out->get(), from, {env, copy.tmp}, tee);
  if (!copied.ok()) {
    (void)env->Unlink(copy.tmp);
    return copied.status();
  }
  copy.content = *std::move(copied);
  return copy;
}

bool LocalTier::AdoptOwn(const std::string& name, const v1::Entry& entry,
                         const std::string& staged_path, int staged_fd,
                         const struct stat& verified) {
  const std::string path = absl::StrCat(options_.dir, "/", name);
  const std::string dir = path.substr(0, path.rfind('/'));
  // Renamed under a temporary name first: the rename goes by name while the
  // bytes were verified through the fd, and only a file that is that inode
  // with no other name may replace anything under `name`.
  const std::string tmp = absl::StrCat(
      dir, "/", UniqueTempName(name.substr(name.rfind('/') + 1), "adopt"));
  Env* const env = options_.env;
  struct stat renamed;
  if (!MakeGroupDirs(dir, kTierDirMode, env).ok() ||
      !env->Rename(staged_path, tmp).ok()) {
    (void)env->Unlink(staged_path);
    return false;
  }
  if (!env->Lstat(tmp, &renamed).ok() || verified.st_dev != renamed.st_dev ||
      verified.st_ino != renamed.st_ino || renamed.st_nlink != 1 ||
      !env->Rename(tmp, path).ok()) {
    (void)env->Unlink(tmp);
    return false;
  }
  (void)env->Chmod(staged_fd, path, kTierFileMode);
  Admit(name, entry.size(), /*handed_out=*/true, /*verified=*/true);
  return true;
}

absl::StatusOr<UniqueFd> LocalTier::Ingest(const EntryKey& id, v1::Entry* entry,
                                           const std::string& staged_path,
                                           int staged_fd, const CopyTee& tee) {
  Env* const env = options_.env;
  struct stat verified;
  if (absl::Status s = env->Fstat(staged_fd, staged_path, &verified); !s.ok()) {
    return s;
  }
  // The name carries the digest, which the request may have left to the
  // daemon: known only once the bytes are hashed.
  auto matches = [&](const CopyResult& content) -> absl::Status {
    if (content.size != entry->size() ||
        (!entry->sha256().empty() && content.sha256 != entry->sha256())) {
      return absl::InvalidArgumentError(
          absl::StrCat(staged_path, " hashes to ", content.sha256, " (",
                       content.size, " bytes), not the entry's ",
                       entry->sha256(), " (", entry->size(), " bytes)"));
    }
    entry->set_sha256(content.sha256);
    return absl::OkStatus();
  };
  std::string name = NameFor(id, entry->sha256());
  if (verified.st_uid != geteuid()) {
    // Another user's file: the tier's copy is the daemon's own, made from
    // the verified inode (through the fd, with a fresh offset) and hashed
    // as it is copied: one pass, and nobody else can write what was hashed.
    const std::string from = absl::StrCat("/proc/self/fd/", staged_fd);
    absl::StatusOr<UniqueFd> in = env->Open(from, O_RDONLY);
    if (!in.ok()) return in.status();
    absl::StatusOr<TempCopy> copied =
        CopyToTemp(absl::StrCat(options_.dir, "/", name), in->get(), from, tee);
    if (!copied.ok()) return copied.status();
    absl::Status status = matches(copied->content);
    name = NameFor(id, entry->sha256());
    Arrival arrival(this, name);
    if (status.ok()) {
      status = env->Rename(copied->tmp, absl::StrCat(options_.dir, "/", name));
    }
    if (!status.ok()) {
      (void)env->Unlink(copied->tmp);
      return status;
    }
    (void)env->Unlink(staged_path);
    Admit(name, entry->size(), /*handed_out=*/true, /*verified=*/true);
  } else {
    // The daemon's own: hashed in place (and copied to `tee` as it is
    // read), then renamed into the tier.
    absl::StatusOr<CopyResult> hashed = CopyAndHash(
        staged_fd, tee.fd, staged_path, {env, tee.name, tee.sync_behind});
    if (!hashed.ok()) return hashed.status();
    if (absl::Status s = matches(*hashed); !s.ok()) return s;
    name = NameFor(id, entry->sha256());
    Arrival arrival(this, name);
    if (!AdoptOwn(name, *entry, staged_path, staged_fd, verified)) {
      return absl::UnavailableError(
          absl::StrCat("could not adopt ", staged_path, " into the tier"));
    }
  }
  absl::StatusOr<UniqueFd> copy =
      env->Open(absl::StrCat(options_.dir, "/", name), O_RDONLY | O_NOFOLLOW);
  if (!copy.ok()) return copy.status();
  CopyResult content;
  content.size = entry->size();
  content.sha256 = entry->sha256();
  RememberVerified(copy->get(), content);
  return copy;
}

void LocalTier::Remove(const EntryKey& id) {
  const std::string subdir =
      absl::StrCat(NamespaceName(id.ns()), "/", id.compiler_version());
  const std::string prefix = absl::StrCat(id.key(), ".");
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<std::string>> files =
      options_.env->ListDir(absl::StrCat(options_.dir, "/", subdir));
  if (!files.ok()) return;
  for (const std::string& file : *files) {
    if (!absl::StartsWith(file, prefix)) continue;
    const std::string name = absl::StrCat(subdir, "/", file);
    (void)options_.env->Unlink(absl::StrCat(options_.dir, "/", name));
    auto it = files_.find(name);
    if (it != files_.end()) {
      used_ -= it->second->size;
      lru_.erase(it->second);
      files_.erase(it);
    }
  }
}

uint64_t LocalTier::used_bytes() const {
  absl::MutexLock lock(&mu_);
  return used_;
}

void LocalTier::Scan(const std::string& rel) {
  Env* const env = options_.env;
  const std::string dir =
      rel.empty() ? options_.dir : absl::StrCat(options_.dir, "/", rel);
  absl::StatusOr<std::vector<std::string>> names = env->ListDir(dir);
  if (!names.ok()) return;
  for (const std::string& file : *names) {
    const std::string name = rel.empty() ? file : absl::StrCat(rel, "/", file);
    const std::string path = absl::StrCat(options_.dir, "/", name);
    struct stat st;
    if (!env->Lstat(path, &st).ok()) continue;
    if (S_ISDIR(st.st_mode)) {
      Scan(name);
      continue;
    }
    if (!S_ISREG(st.st_mode)) continue;
    if (absl::StartsWith(file, ".")) {
      // A fill interrupted by a crash (an old one: a young one may be a fill
      // in progress now).
      if (env->Now() - absl::TimeFromTimespec(st.st_mtim) > absl::Hours(1)) {
        (void)env->Unlink(path);
      }
      continue;
    }
    AdmitScanned(name);
  }
}

bool TierServes(const LocalTier* tier, const EntryKey& id) {
  return tier != nullptr && id.ns() == Namespace::kNeff;
}

v1::Entry ServeLocally(LocalTier* tier, const EntryKey& id,
                       const v1::Entry& entry) {
  if (!TierServes(tier, id)) return entry;
  absl::StatusOr<v1::Entry> local = tier->Get(id, entry);
  return local.ok() ? *local : entry;
}

}  // namespace neffd
