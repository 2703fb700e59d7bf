#include "daemon/tier/local_tier.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "store/digest.h"
#include "store/file_util.h"

namespace neffd {

struct LocalTier::Filling {
  absl::Notification done;
  absl::Status status;
};

LocalTier::LocalTier(LocalTierOptions options) : options_(std::move(options)) {}

LocalTier::~LocalTier() {
  if (scanner_.joinable()) scanner_.join();
}

absl::StatusOr<std::unique_ptr<LocalTier>> LocalTier::Open(
    LocalTierOptions options) {
  if (absl::Status s = MakeDirs(options.dir); !s.ok()) return s;
  if (options.capacity_bytes == 0) {
    struct statvfs fs;
    if (statvfs(options.dir.c_str(), &fs) != 0) {
      return absl::ErrnoToStatus(errno, "statvfs " + options.dir);
    }
    options.capacity_bytes =
        static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize / 5;
  }
  std::unique_ptr<LocalTier> tier(new LocalTier(std::move(options)));
  tier->scanner_ = std::thread([t = tier.get()] { t->Scan(); });
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

std::optional<bool> LocalTier::Touch(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = files_.find(name);
  if (it == files_.end()) return std::nullopt;
  it->second->handed_out = options_.now();
  lru_.splice(lru_.end(), lru_, it->second);
  return it->second->verified;
}

void LocalTier::Admit(const std::string& name, uint64_t size, bool handed_out,
                      bool verified) {
  absl::MutexLock lock(&mu_);
  if (auto it = files_.find(name); it != files_.end()) {
    it->second->verified = it->second->verified || verified;
    return;
  }
  const absl::Time when = handed_out ? options_.now() : absl::InfinitePast();
  auto at = handed_out ? lru_.end() : lru_.begin();
  files_[name] = lru_.insert(at, File{name, size, when, verified});
  used_ += size;
  EvictOverCapacity();
}

void LocalTier::Drop(const std::string& name) {
  absl::MutexLock lock(&mu_);
  unlink(absl::StrCat(options_.dir, "/", name).c_str());
  auto it = files_.find(name);
  if (it == files_.end()) return;
  used_ -= it->second->size;
  lru_.erase(it->second);
  files_.erase(it);
}

bool LocalTier::Matches(const std::string& name, const v1::Entry& entry) const {
  const std::string path = absl::StrCat(options_.dir, "/", name);
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return false;
  absl::StatusOr<CopyResult> hashed = CopyAndHash(fd.get(), -1, path);
  return hashed.ok() && hashed->size == entry.size() &&
         hashed->sha256 == entry.sha256();
}

void LocalTier::EvictOverCapacity() {
  const absl::Time now = options_.now();
  while (used_ > options_.capacity_bytes && !lru_.empty()) {
    File& oldest = lru_.front();
    if (now - oldest.handed_out < options_.pin) break;  // all others newer
    unlink(absl::StrCat(options_.dir, "/", oldest.name).c_str());
    used_ -= oldest.size;
    files_.erase(oldest.name);
    lru_.pop_front();
  }
}

absl::StatusOr<v1::Entry> LocalTier::Get(const EntryKey& id,
                                         const v1::Entry& entry) {
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
      (lstat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode))) {
    if (Matches(name, entry)) {
      Admit(name, entry.size(), /*handed_out=*/true, /*verified=*/true);
      return Localized(entry, name);
    }
    Drop(name);
  }
  std::shared_ptr<Filling> filling;
  bool leader = false;
  {
    absl::MutexLock lock(&mu_);
    std::shared_ptr<Filling>& slot = fills_[name];
    if (slot == nullptr) {
      slot = std::make_shared<Filling>();
      leader = true;
    }
    filling = slot;
  }
  if (leader) {
    filling->status = Fill(name, entry);
    if (filling->status.ok()) {
      Admit(name, entry.size(), /*handed_out=*/true, /*verified=*/true);
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
  return Localized(entry, name);
}

absl::Status LocalTier::Fill(const std::string& name, const v1::Entry& entry) {
  UniqueFd in(open(entry.path().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!in.valid()) return absl::ErrnoToStatus(errno, "opening " + entry.path());
  const std::string path = absl::StrCat(options_.dir, "/", name);
  const std::string dir = path.substr(0, path.rfind('/'));
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  const std::string tmp = absl::StrCat(
      dir, "/", UniqueTempName(name.substr(name.rfind('/') + 1), "tier"));
  UniqueFd out(open(
      tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644));
  if (!out.valid()) return absl::ErrnoToStatus(errno, "creating " + tmp);
  absl::StatusOr<CopyResult> copied =
      CopyAndHash(in.get(), out.get(), entry.path());
  absl::Status status;
  if (!copied.ok()) {
    status = copied.status();
  } else {
    filled_bytes_ += copied->size;
    if (copied->size != entry.size() || copied->sha256 != entry.sha256()) {
      status = absl::DataLossError(
          absl::StrCat(entry.path(), " no longer matches its sha256 (",
                       copied->sha256, " != ", entry.sha256(), ")"));
    } else if (rename(tmp.c_str(), path.c_str()) != 0) {
      status = absl::ErrnoToStatus(errno, "installing " + path);
    }
    // No fsync, as for an adopted copy: a tier file from before a restart
    // is hashed again before it is handed out (Get), so a power loss costs
    // a refill, never a torn NEFF, while an fsync would cost the first rank
    // of each host one disk flush per entry.
  }
  if (!status.ok()) unlink(tmp.c_str());
  return status;
}

bool LocalTier::Adopt(const EntryKey& id, const v1::Entry& entry,
                      const std::string& staged_path, int staged_fd) {
  const std::string name = NameFor(id, entry.sha256());
  const std::string path = absl::StrCat(options_.dir, "/", name);
  const std::string dir = path.substr(0, path.rfind('/'));
  // Renamed under a temporary name first: the rename goes by name while the
  // bytes were verified through the fd, and only a file that is that inode
  // with no other name may replace anything under `name`.
  const std::string tmp = absl::StrCat(
      dir, "/", UniqueTempName(name.substr(name.rfind('/') + 1), "adopt"));
  if (!MakeDirs(dir).ok() || rename(staged_path.c_str(), tmp.c_str()) != 0) {
    unlink(staged_path.c_str());
    return false;
  }
  struct stat verified, renamed;
  if (fstat(staged_fd, &verified) != 0 || lstat(tmp.c_str(), &renamed) != 0 ||
      verified.st_dev != renamed.st_dev || verified.st_ino != renamed.st_ino ||
      renamed.st_nlink != 1 || rename(tmp.c_str(), path.c_str()) != 0) {
    unlink(tmp.c_str());
    return false;
  }
  fchmod(staged_fd, 0444);
  Admit(name, entry.size(), /*handed_out=*/true, /*verified=*/true);
  return true;
}

void LocalTier::Remove(const EntryKey& id) {
  const std::string prefix = absl::StrCat(
      NamespaceName(id.ns()), "/", id.compiler_version(), "/", id.key(), ".");
  const std::string dir = absl::StrCat(
      options_.dir, "/", NamespaceName(id.ns()), "/", id.compiler_version());
  absl::MutexLock lock(&mu_);
  std::error_code ec;
  for (const auto& f : std::filesystem::directory_iterator(dir, ec)) {
    const std::string name =
        absl::StrCat(NamespaceName(id.ns()), "/", id.compiler_version(), "/",
                     f.path().filename().string());
    if (!absl::StartsWith(name, prefix)) continue;
    unlink(f.path().c_str());
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

void LocalTier::Scan() {
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(
           options_.dir, std::filesystem::directory_options::none, ec);
       !ec && it != std::filesystem::recursive_directory_iterator();
       it.increment(ec)) {
    if (!it->is_regular_file(ec)) continue;
    const std::string file = it->path().filename().string();
    if (absl::StartsWith(file, ".")) {
      // A fill interrupted by a crash (an old one: a young one may be a fill
      // in progress now).
      struct stat st;
      if (lstat(it->path().c_str(), &st) == 0 &&
          absl::Now() - absl::TimeFromTimespec(st.st_mtim) > absl::Hours(1)) {
        unlink(it->path().c_str());
      }
      continue;
    }
    Admit(it->path().string().substr(options_.dir.size() + 1),
          it->file_size(ec), /*handed_out=*/false, /*verified=*/false);
  }
}

}  // namespace neffd
