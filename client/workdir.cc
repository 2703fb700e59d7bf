#include "client/workdir.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

// For XXH3_state_t's definition: the state lives on the stack.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

namespace neffd {
namespace {

constexpr char kMarker[] = ".neffd-complete";
constexpr char kFingerprintPrefix[] = "xxh3:";

// The size and XXH3-128 of what `fd` reads from its offset to its end, as
// "xxh3:" and 32 hex digits: whether an output is still the one that was
// marked whole. Not SHA-256: this is no content address, and a pass over a
// large NEFF at memory speed instead of SHA-256's keeps it off the publish's
// critical path (issue 30); the daemon's digest names the entry.
absl::StatusOr<std::pair<uint64_t, std::string>> Fingerprint(
    int fd, const std::string& what) {
  thread_local const std::unique_ptr<char[]> buf(new char[1 << 20]);
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  uint64_t size = 0;
  for (;;) {
    const ssize_t n = read(fd, buf.get(), 1 << 20);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "reading " + what);
    if (n == 0) break;
    XXH3_128bits_update(&state, buf.get(), n);
    size += n;
  }
  const XXH128_hash_t hash = XXH3_128bits_digest(&state);
  char hex[33];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx",
                static_cast<unsigned long long>(hash.high64),
                static_cast<unsigned long long>(hash.low64));
  return std::make_pair(size, absl::StrCat(kFingerprintPrefix, hex));
}
constexpr int kMaxClaimRaces = 100;

// Opens `path` as a directory, creating it if needed (`*created` says
// whether this call did).
absl::StatusOr<UniqueFd> OpenDir(const std::string& path,
                                 bool* created = nullptr) {
  const bool made = mkdir(path.c_str(), 0755) == 0;
  if (!made && errno != EEXIST) {
    return absl::ErrnoToStatus(errno, "creating " + path);
  }
  if (created != nullptr) *created = made;
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd.valid() && errno != ENOENT) {
    return absl::ErrnoToStatus(errno, "opening " + path);
  }
  return fd;
}

// True if the locked directory `fd` is still the one at `path` (its previous
// owner may have removed it between our open and our flock).
bool StillLinked(int fd, const std::string& path) {
  struct stat held, named;
  return fstat(fd, &held) == 0 && held.st_nlink > 0 &&
         stat(path.c_str(), &named) == 0 && named.st_ino == held.st_ino &&
         named.st_dev == held.st_dev;
}

}  // namespace

WorkDir::WorkDir(std::string path, Namespace ns, FileLock lock, bool is_private)
    : path_(std::move(path)),
      output_(absl::StrCat(
          path_, "/",
          ns == Namespace::kNeff ? "module.neff" : "module.hlo.pb")),
      lock_(std::move(lock)),
      private_(is_private) {}

std::string WorkDir::BaseFor(const std::string& debug_dir, Namespace ns) {
  return absl::StrCat(debug_dir,
                      ns == Namespace::kNeff ? "/neuronx-cc" : "/hlo");
}

absl::StatusOr<WorkDir> WorkDir::Claim(const std::string& debug_dir,
                                       const EntryKey& id, absl::Time deadline,
                                       Env* env) {
  const std::string base = BaseFor(debug_dir, id.ns());
  if (absl::Status s = MakeDirs(base); !s.ok()) return s;
  const std::string path = absl::StrCat(base, "/", id.key());
  for (int race = 0; race < kMaxClaimRaces; ++race) {
    bool created = false;
    absl::StatusOr<UniqueFd> fd = OpenDir(path, &created);
    if (!fd.ok()) return fd.status();
    if (!fd->valid()) continue;  // removed between mkdir and open
    absl::StatusOr<FileLock> lock =
        FileLock::Acquire(*std::move(fd), deadline, env);
    if (!lock.ok()) return lock.status();
    if (!lock->held()) {
      return absl::DeadlineExceededError(absl::StrCat(
          path, " is in use by another compile of ", id.Canonical()));
    }
    if (StillLinked(lock->fd(), path)) {
      WorkDir claimed(path, id.ns(), *std::move(lock), false);
      claimed.inherited_ = !created;
      return claimed;
    }
  }
  return absl::UnavailableError(
      absl::StrCat("could not claim ", path, ": it keeps being replaced"));
}

absl::StatusOr<WorkDir> WorkDir::Private(const std::string& debug_dir,
                                         const EntryKey& id) {
  static std::atomic<int> counter{0};
  const std::string base = BaseFor(debug_dir, id.ns());
  if (absl::Status s = MakeDirs(base); !s.ok()) return s;
  const std::string path =
      absl::StrCat(base, "/", id.key(), ".", getpid(), ".", counter++);
  std::error_code ignored;
  std::filesystem::remove_all(path, ignored);  // a dead process's, same pid
  absl::StatusOr<UniqueFd> fd = OpenDir(path);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<FileLock> lock =
      FileLock::Acquire(*std::move(fd), absl::InfinitePast(), Env::Default());
  if (!lock.ok()) return lock.status();
  return WorkDir(path, id.ns(), *std::move(lock), true);
}

std::optional<CopyResult> WorkDir::CompleteOutput(const EntryKey& id) const {
  absl::StatusOr<std::string> marker =
      ReadSmallFile(absl::StrCat(path_, "/", kMarker), 4096);
  if (!marker.ok()) return std::nullopt;
  std::vector<std::string> fields =
      absl::StrSplit(*marker, absl::ByAnyChar(" \n"), absl::SkipEmpty());
  CopyResult recorded;
  if (fields.size() != 5 || fields[0] != NamespaceName(id.ns()) ||
      fields[1] != id.compiler_version() || fields[2] != id.key() ||
      !absl::SimpleAtoi(fields[3], &recorded.size)) {
    return std::nullopt;
  }
  UniqueFd fd(open(output_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid()) return std::nullopt;
  if (absl::StartsWith(fields[4], kFingerprintPrefix)) {
    absl::StatusOr<std::pair<uint64_t, std::string>> actual =
        Fingerprint(fd.get(), output_);
    if (!actual.ok() || actual->first != recorded.size ||
        actual->second != fields[4]) {
      return std::nullopt;
    }
    return recorded;  // its sha256 is the daemon's to compute
  }
  // A marker of an older client: the output's sha256.
  absl::StatusOr<CopyResult> actual = CopyAndHash(fd.get(), -1, output_);
  if (!actual.ok() || actual->size != recorded.size ||
      actual->sha256 != fields[4]) {
    return std::nullopt;
  }
  return *actual;
}

absl::Status WorkDir::Clear() {
  std::error_code ec;
  std::vector<std::filesystem::path> children;
  for (std::filesystem::directory_iterator it(path_, ec), end; !ec && it != end;
       it.increment(ec)) {
    children.push_back(it->path());
  }
  if (ec) return absl::ErrnoToStatus(ec.value(), "listing " + path_);
  for (const std::filesystem::path& child : children) {
    std::filesystem::remove_all(child, ec);
    if (ec)
      return absl::ErrnoToStatus(ec.value(), "removing " + child.string());
  }
  return absl::OkStatus();
}

absl::StatusOr<UniqueFd> WorkDir::OpenOutput(struct stat* st) const {
  UniqueFd fd(open(output_.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd.valid() || fstat(fd.get(), st) != 0 || !S_ISREG(st->st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        "compile_fn reported success but left no file at ", output_));
  }
  return fd;
}

absl::StatusOr<CopyResult> WorkDir::Output() const {
  struct stat st;
  absl::StatusOr<UniqueFd> fd = OpenOutput(&st);
  if (!fd.ok()) return fd.status();
  return CopyResult{static_cast<uint64_t>(st.st_size), ""};
}

absl::StatusOr<CopyResult> WorkDir::MarkComplete(const EntryKey& id) {
  struct stat st;
  absl::StatusOr<UniqueFd> fd = OpenOutput(&st);
  if (!fd.ok()) return fd.status();
  absl::StatusOr<std::pair<uint64_t, std::string>> fingerprint =
      Fingerprint(fd->get(), output_);
  if (!fingerprint.ok()) return fingerprint.status();
  // Not fsynced: CompleteOutput re-hashes the output against the marker, so
  // a marker that outlives a torn output after a power loss is harmless.
  if (absl::Status s = WriteFileAtomically(
          path_, kMarker,
          absl::StrCat(NamespaceName(id.ns()), " ", id.compiler_version(), " ",
                       id.key(), " ", fingerprint->first, " ",
                       fingerprint->second, "\n"),
          "c", /*durable=*/false);
      !s.ok()) {
    return s;
  }
  return CopyResult{fingerprint->first, ""};
}

std::string WorkDir::CompilerLogTail() const {
  constexpr off_t kMaxLogBytes = 1 << 20;
  UniqueFd fd(open(absl::StrCat(path_, "/log-neuron-cc.txt").c_str(),
                   O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0) return "";
  const off_t start = std::max<off_t>(st.st_size - kMaxLogBytes, 0);
  std::string out(st.st_size - start, '\0');
  const ssize_t n = pread(fd.get(), out.data(), out.size(), start);
  out.resize(n > 0 ? n : 0);
  return out;
}

void WorkDir::Unmark() { unlink(absl::StrCat(path_, "/", kMarker).c_str()); }

void WorkDir::Remove() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
  lock_.Release();
}

}  // namespace neffd
