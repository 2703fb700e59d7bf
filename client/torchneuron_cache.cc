#include "client/torchneuron_cache.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <utility>
#include <vector>

#include "absl/memory/memory.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/backend.h"
#include "client/torchneuron_key.h"
#include "store/digest.h"
#include "store/file_util.h"
#include "store/store.h"

namespace neffd {
namespace {

// As the store's bound on an artifact (StoreOptions::max_artifact_bytes).
constexpr uint64_t kMaxNeffBytes = uint64_t{64} << 30;

bool IsTorchNeuronKey(absl::string_view key) {
  if (key.size() != kTorchNeuronKeyLength) return false;
  for (char c : key) {
    if (!absl::ascii_isdigit(c) && (c < 'a' || c > 'f')) return false;
  }
  return true;
}

// A shard directory's name: two lowercase hex digits.
bool IsShardName(const std::string& name) {
  return name.size() == 2 && IsTorchNeuronKey(name + std::string(30, '0'));
}

// The file's bytes; NotFound when it is missing or empty (TorchNeuron's
// miss), DataLoss for something that is not a regular file.
absl::StatusOr<std::string> ReadEntryFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = ReadSmallFile(path, kMaxNeffBytes);
  if (bytes.ok() && bytes->empty()) {
    return absl::NotFoundError(absl::StrCat(path, " is empty"));
  }
  return bytes;
}

// The names of the directories in `dir` (none if it cannot be read).
std::vector<std::string> SubDirectories(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code type_ec;
    if (e.is_directory(type_ec) && !e.is_symlink(type_ec)) {
      out.push_back(e.path().filename().string());
    }
  }
  return out;
}

// TorchNeuron's cache clear: every regular file named *.neff below `root`,
// then the empty shard directories two levels deep.
absl::Status ClearTorchNeuronFiles(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::recursive_directory_iterator it(root, ec), end;
  if (ec) {
    if (ec == std::errc::no_such_file_or_directory) return absl::OkStatus();
    return absl::InternalError(
        absl::StrCat("listing ", root, ": ", ec.message()));
  }
  std::vector<fs::path> doomed;
  for (; it != end; it.increment(ec)) {
    if (ec) break;  // a directory that vanished under the walk
    std::error_code type_ec;
    if (it->is_regular_file(type_ec) && !it->is_symlink(type_ec) &&
        absl::EndsWith(it->path().filename().string(), ".neff")) {
      doomed.push_back(it->path());
    }
  }
  for (const fs::path& path : doomed) {
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return absl::ErrnoToStatus(errno,
                                 absl::StrCat("removing ", path.string()));
    }
  }
  for (const std::string& first : SubDirectories(root)) {
    if (!IsShardName(first)) continue;
    const std::string outer = absl::StrCat(root, "/", first);
    for (const std::string& second : SubDirectories(outer)) {
      if (IsShardName(second)) rmdir(absl::StrCat(outer, "/", second).c_str());
    }
    rmdir(outer.c_str());  // fails, as it should, unless empty
  }
  return absl::OkStatus();
}

}  // namespace

TorchNeuronCompileLock::TorchNeuronCompileLock(TorchNeuronCache* cache,
                                               std::string key,
                                               std::unique_ptr<Lease> lease)
    : cache_(cache), key_(std::move(key)), lease_(std::move(lease)) {}

TorchNeuronCompileLock::~TorchNeuronCompileLock() { Release(); }

bool TorchNeuronCompileLock::held() const { return registered_; }

void TorchNeuronCompileLock::Release() {
  if (!registered_) return;
  cache_->Unregister(key_);
  registered_ = false;
  lease_.reset();  // abandons a lease that was not published
}

absl::StatusOr<std::unique_ptr<TorchNeuronCache>>
TorchNeuronCache::FromEnvironment(const std::string& compiler_version,
                                  const std::string& address,
                                  const ClientTls& tls) {
  absl::StatusOr<std::unique_ptr<CacheClient>> client =
      CacheClient::FromEnvironment(address, tls);
  if (!client.ok()) return client.status();
  return std::make_unique<TorchNeuronCache>(*std::move(client),
                                            compiler_version);
}

TorchNeuronCache::TorchNeuronCache(std::unique_ptr<CacheClient> client,
                                   std::string compiler_version)
    : client_(std::move(client)),
      compiler_version_(std::move(compiler_version)) {}

TorchNeuronCache::~TorchNeuronCache() = default;

std::string TorchNeuronCache::EntryPath(absl::string_view key) const {
  return absl::StrCat(client_->options().neff_cache_dir, "/", key.substr(0, 2),
                      "/", key.substr(2, 2), "/", key, ".neff");
}

absl::StatusOr<EntryKey> TorchNeuronCache::Id(absl::string_view key) const {
  if (!IsTorchNeuronKey(key)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key: \"", key, "\" is not a TorchNeuron key (",
                     kTorchNeuronKeyLength, " lowercase hex digits)"));
  }
  return EntryKey::Parse("neff", compiler_version_, key);
}

absl::StatusOr<Store*> TorchNeuronCache::OpenStore() {
  absl::MutexLock lock(&mu_);
  if (store_ == nullptr) {
    StoreOptions options;
    options.root = client_->options().neff_cache_dir;
    options.ns = Namespace::kNeff;
    options.host_id = client_->options().host;
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(options);
    if (!store.ok()) return store.status();
    store_ = *std::move(store);
  }
  return store_.get();
}

absl::StatusOr<std::string> TorchNeuronCache::Get(absl::string_view key) {
  absl::StatusOr<EntryKey> id = Id(key);
  if (!id.ok()) return id.status();
  absl::StatusOr<std::optional<CacheResult>> found =
      client_->Lookup("neff", compiler_version_, key);
  if (!found.ok() && !IsCompileFailure(found.status())) return found.status();
  if (found.ok() && found->has_value()) {
    absl::StatusOr<std::string> bytes = ReadEntryFile((*found)->path);
    if (bytes.ok()) return bytes;  // else removed since: TorchNeuron's file
  }
  absl::StatusOr<std::string> bytes = ReadEntryFile(EntryPath(key));
  if (bytes.ok() || absl::IsNotFound(bytes.status())) return bytes;
  if (IsDamage(bytes.status())) {  // TorchNeuron cannot read it either
    return absl::NotFoundError(bytes.status().message());
  }
  return bytes.status();
}

absl::StatusOr<bool> TorchNeuronCache::Exists(absl::string_view key) {
  absl::StatusOr<EntryKey> id = Id(key);
  if (!id.ok()) return id.status();
  absl::StatusOr<std::optional<CacheResult>> found =
      client_->Lookup("neff", compiler_version_, key);
  if (found.ok() && found->has_value()) return true;
  if (!found.ok() && !IsCompileFailure(found.status())) return found.status();
  struct stat st;
  return stat(EntryPath(key).c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         st.st_size > 0;
}

absl::StatusOr<std::unique_ptr<TorchNeuronCompileLock>>
TorchNeuronCache::AcquireLock(absl::string_view key, absl::Duration timeout) {
  absl::StatusOr<EntryKey> id = Id(key);
  if (!id.ok()) return id.status();
  if (timeout < absl::ZeroDuration()) timeout = client_->options().lock_timeout;
  LockAnswer answer;
  bool fallback = !client_->options().use_daemon, counted = false;
  absl::Status s = client_->OnBackend(fallback, counted, [&](Backend& b) {
    absl::StatusOr<LockAnswer> got = b.Lock(*id, timeout);
    if (got.ok()) answer = *std::move(got);
    return got.status();
  });
  if (!s.ok()) return s;
  switch (answer.outcome) {
    case v1::LockResponse::GRANTED:
      break;
    case v1::LockResponse::READY:  // cached: nothing to hold
      return absl::WrapUnique(
          new TorchNeuronCompileLock(this, std::string(key), nullptr));
    case v1::LockResponse::FAILED:
      return absl::AbortedError(
          absl::StrCat("compile of ", id->Canonical(),
                       " failed (recorded by another client of neffd): ",
                       answer.failure.log().substr(0, 4096)));
    default:
      return absl::DeadlineExceededError(absl::StrCat(
          "lock timeout: waited ", absl::FormatDuration(timeout),
          " for the compile lock on ", key, ", held by another process",
          fallback ? " (without the daemon: flock on its lock file)" : ""));
  }
  auto held = absl::WrapUnique(new TorchNeuronCompileLock(
      this, std::string(key), std::move(answer.lease)));
  absl::MutexLock lock(&mu_);
  if (!locks_.emplace(std::string(key), held.get()).second) {
    // Only after a Put here ended the lease while its lock lives on.
    return absl::FailedPreconditionError(absl::StrCat(
        "the compile lock on ", key, " is held by this process already"));
  }
  held->registered_ = true;
  return held;
}

void TorchNeuronCache::Unregister(const std::string& key) {
  absl::MutexLock lock(&mu_);
  locks_.erase(key);
}

void TorchNeuronCache::PublishThrough(Lease& lease, const EntryKey& id,
                                      const std::string& path,
                                      absl::string_view neff) {
  const CopyResult content{neff.size(), Sha256Hex(neff)};
  absl::StatusOr<v1::Entry> entry =
      lease.Publish(path, content, {}, Lease::FileAfterPublish::kKept);
  if (!entry.ok()) {
    client_->Warn(absl::StrCat("publishing ", id.Canonical(),
                               " to neffd: ", entry.status().message(), "; ",
                               path, " has it for TorchNeuron's readers"));
  }
}

absl::Status TorchNeuronCache::Put(absl::string_view key,
                                   absl::string_view neff) {
  absl::StatusOr<EntryKey> id = Id(key);
  if (!id.ok()) return id.status();
  if (neff.empty()) {
    return absl::InvalidArgumentError(
        "neff: is empty (TorchNeuron reads an empty file as a miss)");
  }
  // The lease of a lock this object holds; else one taken for the publish.
  std::unique_ptr<Lease> lease;
  std::unique_ptr<TorchNeuronCompileLock> own;
  {
    absl::MutexLock lock(&mu_);
    auto it = locks_.find(std::string(key));
    if (it != locks_.end()) lease = std::move(it->second->lease_);
  }
  if (lease == nullptr) {
    absl::StatusOr<std::unique_ptr<TorchNeuronCompileLock>> taken =
        AcquireLock(key);
    if (absl::IsFailedPrecondition(taken.status())) {
      // Held here, and already published through: the file alone.
    } else if (!taken.ok()) {
      return taken.status();
    } else {
      own = *std::move(taken);
      lease = std::move(own->lease_);
    }
  }
  // The file first: the publish ends the lease and wakes the waiters.
  const std::string path = EntryPath(key);
  const std::string shard = path.substr(0, path.rfind('/'));
  if (absl::Status s = MakeDirs(shard, 0777); !s.ok()) return s;
  if (absl::Status s = WriteFileAtomically(shard, path.substr(shard.size() + 1),
                                           neff, client_->options().host);
      !s.ok()) {
    return s;
  }
  if (lease != nullptr) PublishThrough(*lease, *id, path, neff);
  return absl::OkStatus();
}

absl::Status TorchNeuronCache::Remove(absl::string_view key) {
  absl::StatusOr<EntryKey> id = Id(key);
  if (!id.ok()) return id.status();
  const std::string path = EntryPath(key);
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, absl::StrCat("removing ", path));
  }
  absl::StatusOr<Store*> store = OpenStore();
  if (!store.ok()) return store.status();
  absl::Status s = (*store)->Remove(*id);
  return absl::IsNotFound(s) ? absl::OkStatus() : s;
}

absl::Status TorchNeuronCache::Clear() {
  absl::StatusOr<Store*> store = OpenStore();
  if (!store.ok()) return store.status();
  std::vector<EntryKey> entries;
  absl::Status listed = (*store)->ForEachEntry([&](const EntryKey& id) {
    entries.push_back(id);
    return true;
  });
  if (!listed.ok()) return listed;
  for (const EntryKey& id : entries) {
    absl::Status s = (*store)->Remove(id);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
  }
  return ClearTorchNeuronFiles(client_->options().neff_cache_dir);
}

}  // namespace neffd
