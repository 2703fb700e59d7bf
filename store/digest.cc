#include "store/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <optional>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace neffd {

struct Sha256::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  failed_ = ctx_->md == nullptr ||
            EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1;
}

Sha256::~Sha256() = default;

void Sha256::Update(const void* data, size_t size) {
  if (failed_) return;
  failed_ = EVP_DigestUpdate(ctx_->md, data, size) != 1;
}

absl::StatusOr<std::string> Sha256::HexDigest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (failed_ || EVP_DigestFinal_ex(ctx_->md, md, &len) != 1) {
    char reason[256];
    ERR_error_string_n(ERR_get_error(), reason, sizeof(reason));
    return absl::InternalError(
        absl::StrCat("sha256: OpenSSL failed: ", reason));
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(md), len));
}

std::string Sha256Hex(absl::string_view data) {
  Sha256 h;
  h.Update(data.data(), data.size());
  return h.HexDigest().value_or("");
}

bool IsSha256Hex(absl::string_view hex) {
  if (hex.size() != 64) return false;
  for (char c : hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

namespace {

// 1 MiB chunks: large enough to amortise syscalls on FSx, small enough to
// stay in cache between the read, the hash and the write.
constexpr size_t kChunk = 1 << 20;
// Writeback window of a copy (a multiple of kChunk).
constexpr off_t kWindow = 8 << 20;
// How far an output that its caller will fsync (sync_behind) gets ahead of
// its last background flush before the next one starts.
constexpr uint64_t kSyncWindow = 16 << 20;
// Kept by RememberVerified.
constexpr size_t kMaxVerified = 64;

// Reads one chunk, retrying EINTR; 0 at EOF.
absl::StatusOr<size_t> ReadChunk(int fd, char* buf, absl::string_view what) {
  for (;;) {
    ssize_t n = read(fd, buf, kChunk);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR)
      return absl::ErrnoToStatus(errno, absl::StrCat("reading ", what));
  }
}

// This thread's chunk buffer, allocated once (uninitialised: every byte used
// is read into first) and kept for the thread's life.
char* ThisThreadsChunk() {
  thread_local const std::unique_ptr<char[]> chunk(new char[kChunk]);
  return chunk.get();
}

// True if what is left of `fd` from its offset is one chunk at most: a
// regular file whose size says so. Anything else (a pipe, a file that
// fstat cannot size) takes the pipelined path, which handles any length.
bool FitsInOneChunk(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return false;
  const off_t offset = lseek(fd, 0, SEEK_CUR);
  return offset >= 0 && st.st_size - offset <= static_cast<off_t>(kChunk);
}

// Keeps the disk busy while a copy goes on: once `end` closes an 8 MiB
// window, starts its writeback and waits for the one before it, so the
// caller's fsync finds at most two windows left instead of the whole file,
// and dirty memory stays bounded. Advisory; the fsync makes it durable.
void WriteBehind(int fd, off_t end) {
  if (end == 0 || end % kWindow != 0) return;
  (void)sync_file_range(fd, end - kWindow, kWindow, SYNC_FILE_RANGE_WRITE);
  if (end >= 2 * kWindow) {
    (void)sync_file_range(fd, end - 2 * kWindow, kWindow,
                          SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                              SYNC_FILE_RANGE_WAIT_AFTER);
  }
}

// The identity RememberVerified keys on.
struct Identity {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  bool operator==(const Identity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size &&
           mtime_ns == o.mtime_ns && ctime_ns == o.ctime_ns;
  }
};

std::optional<Identity> IdentityOfFd(int fd) {
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) return std::nullopt;
  return Identity{st.st_dev, st.st_ino, st.st_size,
                  int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec,
                  int64_t{st.st_ctim.tv_sec} * 1000000000 + st.st_ctim.tv_nsec};
}

// What RememberVerified recorded, newest last.
class VerifiedFiles {
 public:
  static VerifiedFiles& Get() {
    static VerifiedFiles* const files = new VerifiedFiles;
    return *files;
  }
  void Remember(const Identity& id, const CopyResult& content) {
    absl::MutexLock lock(&mu_);
    Erase(id.dev, id.ino);
    if (files_.size() == kMaxVerified) files_.erase(files_.begin());
    files_.push_back({id, content});
  }
  void Forget(dev_t dev, ino_t ino) {
    absl::MutexLock lock(&mu_);
    Erase(dev, ino);
  }
  std::optional<CopyResult> Find(const Identity& id) {
    absl::MutexLock lock(&mu_);
    for (const auto& [known, content] : files_) {
      if (known == id) return content;
    }
    return std::nullopt;
  }

 private:
  void Erase(dev_t dev, ino_t ino) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (auto it = files_.begin(); it != files_.end(); ++it) {
      if (it->first.dev == dev && it->first.ino == ino) {
        files_.erase(it);
        return;
      }
    }
  }
  absl::Mutex mu_;
  std::vector<std::pair<Identity, CopyResult>> files_ ABSL_GUARDED_BY(mu_);
};

// Copies `size` bytes of a verified file from `in_fd`'s offset to `out_fd`,
// in the kernel where it can, else through this thread's chunk; no hash.
absl::Status CopyWithoutHash(int in_fd, int out_fd, uint64_t size,
                             absl::string_view what, absl::string_view out_name,
                             Env* env) {
  uint64_t copied = 0;
  bool kernel = true;
  while (copied < size) {
    // One window at a time, so that writeback starts behind the copy.
    const size_t want = static_cast<size_t>(
        std::min<uint64_t>(size - copied, kWindow - copied % kWindow));
    size_t n = 0;
    if (kernel) {
      absl::StatusOr<size_t> k = env->CopyRange(in_fd, out_fd, out_name, want);
      if (absl::IsUnimplemented(k.status())) {
        kernel = false;  // e.g. the tier and FSx: read and write below
        continue;
      }
      if (!k.ok()) return k.status();
      n = *k;
    } else {
      char* buf = ThisThreadsChunk();
      absl::StatusOr<size_t> r = ReadChunk(in_fd, buf, what);
      if (!r.ok()) return r.status();
      n = std::min<size_t>(*r, size - copied);
      if (n > 0) {
        if (absl::Status s =
                env->Write(out_fd, out_name, absl::string_view(buf, n));
            !s.ok()) {
          return s;
        }
      }
    }
    if (n == 0) break;  // shorter than it was: the identity check says so
    copied += n;
    WriteBehind(out_fd, static_cast<off_t>(copied));
  }
  return absl::OkStatus();
}

// Threads that write a copy's chunks while its caller reads and hashes the
// next ones: one more is started only when every one is busy, and each is
// kept for the process's life, so a copy starts no thread once the
// process has had as many copies at once before. Each thread keeps its
// ring of buffers for its life too. A thread is started through the Env of
// the copy that needed it, and detached.
class WriterPool {
 public:
  static WriterPool& Get() {
    static WriterPool* const pool = new WriterPool;  // never destroyed
    return *pool;
  }
  // Runs `job` on an idle writer thread (starting one through `env` if none
  // is idle).
  void Run(Env* env, std::function<void()> job) {
    absl::MutexLock lock(&mu_);
    jobs_.push_back(std::move(job));
    if (jobs_.size() > idle_) {
      ++idle_;  // counted idle until it takes its first job
      env->StartThread("neffd-copy", [this] { Loop(); }).Detach();
    }
    wake_.Signal();
  }

 private:
  void Loop() {
    absl::MutexLock lock(&mu_);
    for (;;) {
      while (jobs_.empty()) wake_.Wait(&mu_);
      std::function<void()> job = std::move(jobs_.front());
      jobs_.pop_front();
      --idle_;
      mu_.Unlock();
      job();
      mu_.Lock();
      ++idle_;
    }
  }

  absl::Mutex mu_;
  absl::CondVar wake_;
  std::deque<std::function<void()>> jobs_ ABSL_GUARDED_BY(mu_);
  // Threads waiting for a job.
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;
};

// Where a copy writes: a descriptor, the name errors give it, and whether
// its data is flushed behind the copy (CopyOptions::sync_out_behind).
struct Output {
  int fd;
  std::string name;
  bool sync_behind = false;
};

// A ring of kSlots chunk buffers, one per thread that starts a pipelined
// copy, allocated at its first and kept.
constexpr int kSlots = 4;
char* ThisThreadsRing(int slot) {
  thread_local const std::unique_ptr<char[]> ring(new char[kSlots * kChunk]);
  return ring.get() + static_cast<size_t>(slot) * kChunk;
}

// Hands chunks from the reading (and hashing) thread to a writer thread of
// the pool, through the calling thread's ring of kSlots buffers; each
// buffer is hashed and written from the same bytes, so what was hashed is
// what was written. The state both threads use is shared, so whichever of
// them is last to let go of it frees it.
class WritePipeline {
 public:
  WritePipeline(std::vector<Output> outputs, Env* env)
      : state_(std::make_shared<State>(std::move(outputs), env)) {
    WriterPool::Get().Run(env, [state = state_] { state->WriteLoop(); });
  }
  ~WritePipeline() { (void)Close(); }

  // A free buffer to read into, or nullptr once the writer failed.
  char* Acquire() { return state_->Acquire(); }
  // Queues the buffer from Acquire() holding `n` bytes.
  void Submit(size_t n) { state_->Submit(n); }
  // Waits until everything submitted is written; the first write error.
  absl::Status Close() { return state_->Close(); }

 private:
  struct State : std::enable_shared_from_this<State> {
    State(std::vector<Output> outputs, Env* env)
        : outputs(std::move(outputs)), env(env) {}

    char* Acquire() {
      absl::MutexLock lock(&mu);
      while (status.ok() && filled - written >= kSlots) changed.Wait(&mu);
      if (!status.ok()) return nullptr;
      return ThisThreadsRing(filled % kSlots);
    }
    void Submit(size_t n) {
      absl::MutexLock lock(&mu);
      slots[filled % kSlots] = {ThisThreadsRing(filled % kSlots), n};
      ++filled;
      changed.SignalAll();
    }
    absl::Status Close() {
      absl::MutexLock lock(&mu);
      closed = true;
      changed.SignalAll();
      while (!finished) changed.Wait(&mu);
      return status;
    }
    void WriteLoop() {
      uint64_t offset = 0;
      for (;;) {
        std::pair<const char*, size_t> slot;
        {
          absl::MutexLock lock(&mu);
          while (filled == written && !closed) changed.Wait(&mu);
          if (filled == written || !status.ok()) {  // closed and drained
            while (syncing) changed.Wait(&mu);
            finished = true;
            changed.SignalAll();
            return;
          }
          slot = slots[written % kSlots];
        }
        absl::Status s;
        offset += slot.second;
        for (const Output& out : outputs) {
          s = env->Write(out.fd, out.name,
                         absl::string_view(slot.first, slot.second));
          if (!s.ok()) break;
          WriteBehind(out.fd, static_cast<off_t>(offset));
          if (out.sync_behind) SyncBehind(out, offset);
        }
        absl::MutexLock lock(&mu);
        ++written;
        if (!s.ok() && status.ok()) status = s;
        changed.SignalAll();
      }
    }

    // Once `out` is kSyncWindow past its last flush and none is running,
    // flushes it on another pooled thread while the copy goes on, so the
    // disk's cache flush (most of an fsync of a large file on a virtual
    // disk) overlaps the hashing instead of following it. A failed flush
    // fails the copy: the fsync after it would no longer report the error.
    void SyncBehind(const Output& out, uint64_t offset) {
      {
        absl::MutexLock lock(&mu);
        if (syncing || offset < synced + kSyncWindow) return;
        syncing = true;
        synced = offset;
      }
      WriterPool::Get().Run(env, [self = shared_from_this(), &out] {
        absl::Status s = self->env->Sync(out.fd, out.name);
        absl::MutexLock lock(&self->mu);
        self->syncing = false;
        if (!s.ok() && self->status.ok()) self->status = s;
        self->changed.SignalAll();
      });
    }

    const std::vector<Output> outputs;
    Env* const env;
    absl::Mutex mu;
    // Explicit waits, not Mutex::Await: absl evaluates an Await condition on
    // whichever thread unlocks, reading the waiter's stack, which TSan (with
    // Debian's uninstrumented absl) cannot see ordered.
    absl::CondVar changed;
    std::pair<const char*, size_t> slots[kSlots] ABSL_GUARDED_BY(mu) = {};
    uint64_t filled ABSL_GUARDED_BY(mu) = 0;
    uint64_t written ABSL_GUARDED_BY(mu) = 0;
    bool closed ABSL_GUARDED_BY(mu) = false;
    bool finished ABSL_GUARDED_BY(mu) = false;  // the writer is done
    bool syncing ABSL_GUARDED_BY(mu) = false;   // a SyncBehind flush runs
    uint64_t synced ABSL_GUARDED_BY(mu) = 0;    // where the last one started
    absl::Status status ABSL_GUARDED_BY(mu);
  };
  const std::shared_ptr<State> state_;
};

absl::StatusOr<CopyResult> Finish(Sha256& hash, CopyResult result) {
  absl::StatusOr<std::string> digest = hash.HexDigest();
  if (!digest.ok()) return digest.status();
  result.sha256 = *std::move(digest);
  return result;
}

}  // namespace

absl::StatusOr<CopyResult> HashFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return absl::ErrnoToStatus(errno, "opening " + path);
  absl::StatusOr<CopyResult> hashed = CopyAndHash(fd, -1, path);
  close(fd);
  return hashed;
}

void RememberVerified(int fd, const CopyResult& content) {
  if (std::optional<Identity> id = IdentityOfFd(fd)) {
    VerifiedFiles::Get().Remember(*id, content);
  }
}

void ForgetVerified(int fd) {
  if (std::optional<Identity> id = IdentityOfFd(fd)) {
    VerifiedFiles::Get().Forget(id->dev, id->ino);
  }
}

absl::StatusOr<CopyResult> CopyAndHash(int in_fd, int out_fd,
                                       absl::string_view what,
                                       const CopyOptions& options,
                                       const CopyTee& tee) {
  const absl::string_view out_name =
      options.out_name.empty() ? what : options.out_name;
  if (out_fd >= 0 && tee.fd < 0 && lseek(in_fd, 0, SEEK_CUR) == 0) {
    // A file this process hashed already: the kernel copies it, and it is
    // not read again.
    const std::optional<Identity> before = IdentityOfFd(in_fd);
    std::optional<CopyResult> known;
    if (before.has_value()) known = VerifiedFiles::Get().Find(*before);
    if (known.has_value()) {
      if (absl::Status s = CopyWithoutHash(in_fd, out_fd, known->size, what,
                                           out_name, options.env);
          !s.ok()) {
        return s;
      }
      if (!(IdentityOfFd(in_fd) == before)) {
        return absl::UnavailableError(
            absl::StrCat(what, " changed while it was copied; retry"));
      }
      return *known;
    }
  }
  // Advisory: a larger kernel readahead for a source read once, in order.
  (void)posix_fadvise(in_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<Output> outputs;
  if (out_fd >= 0) {
    outputs.push_back({out_fd, std::string(out_name), options.sync_out_behind});
  }
  if (tee.fd >= 0) {
    outputs.push_back({tee.fd,
                       std::string(tee.name.empty() ? out_name : tee.name),
                       tee.sync_behind});
  }
  Sha256 hash;
  CopyResult result;
  if (outputs.empty() || FitsInOneChunk(in_fd)) {
    // Most NEFFs and every verification: read, hash (and write) in this
    // thread through its own buffer, reused from call to call. A fresh
    // buffer per call cost more than the bytes did: under many ranks
    // verifying small entries at once (fallback mode), zero-filling and
    // faulting in a new 1 MiB per lookup starved a restarting daemon of CPU
    // for 45 s (docs/RELIABILITY.md).
    char* buf = ThisThreadsChunk();
    for (;;) {
      absl::StatusOr<size_t> n = ReadChunk(in_fd, buf, what);
      if (!n.ok()) return n.status();
      if (*n == 0) break;
      hash.Update(buf, *n);
      result.size += *n;
      for (const Output& out : outputs) {
        if (absl::Status s = options.env->Write(out.fd, out.name,
                                                absl::string_view(buf, *n));
            !s.ok()) {
          return s;
        }
      }
    }
    return Finish(hash, result);
  }
  // Copying more than a chunk: hashing and writing run on two threads (this
  // one and a pooled writer), so a publish takes about as long as the slower
  // of the two instead of their sum.
  WritePipeline pipeline(std::move(outputs), options.env);
  for (;;) {
    char* buf = pipeline.Acquire();
    if (buf == nullptr) break;  // the writer failed; Close() says why
    absl::StatusOr<size_t> n = ReadChunk(in_fd, buf, what);
    if (!n.ok()) {
      (void)pipeline.Close();
      return n.status();
    }
    if (*n == 0) break;
    hash.Update(buf, *n);
    result.size += *n;
    pipeline.Submit(*n);
  }
  if (absl::Status s = pipeline.Close(); !s.ok()) return s;
  return Finish(hash, result);
}

absl::StatusOr<uint64_t> CopyFileContents(int in_fd, int out_fd,
                                          absl::string_view what) {
  uint64_t copied = 0;
  // In the kernel (page cache to page cache, or a reflink), so the bytes
  // never pass through this process.
  for (;;) {
    ssize_t n = copy_file_range(in_fd, nullptr, out_fd, nullptr, 1 << 30, 0);
    if (n > 0) {
      copied += n;
      continue;
    }
    if (n == 0) return copied;
    if (errno == EINTR) continue;
    // Not between these two files (another filesystem type, a pipe, an old
    // kernel): copy through this thread's buffer from where the kernel
    // stopped.
    if (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
        errno == EOPNOTSUPP) {
      break;
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("copying ", what));
  }
  char* buf = ThisThreadsChunk();
  for (;;) {
    absl::StatusOr<size_t> n = ReadChunk(in_fd, buf, what);
    if (!n.ok()) return n.status();
    if (*n == 0) return copied;
    if (absl::Status s =
            Env::Default()->Write(out_fd, what, absl::string_view(buf, *n));
        !s.ok()) {
      return s;
    }
    copied += *n;
  }
}

}  // namespace neffd
