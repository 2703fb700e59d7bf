#include "store/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace neffd {

struct Sha256::Ctx {
  EVP_MD_CTX *md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  failed_ = ctx_->md == nullptr ||
            EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr) != 1;
}

Sha256::~Sha256() = default;

void Sha256::Update(const void *data, size_t size) {
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
      absl::string_view(reinterpret_cast<const char *>(md), len));
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

// Reads one chunk, retrying EINTR; 0 at EOF.
absl::StatusOr<size_t> ReadChunk(int fd, char *buf, absl::string_view what) {
  for (;;) {
    ssize_t n = read(fd, buf, kChunk);
    if (n >= 0) return static_cast<size_t>(n);
    if (errno != EINTR)
      return absl::ErrnoToStatus(errno, absl::StrCat("reading ", what));
  }
}

// This thread's chunk buffer, allocated once (uninitialised: every byte used
// is read into first) and kept for the thread's life.
char *ThisThreadsChunk() {
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

// Hands chunks from the reading (and hashing) thread to the writing one,
// through a ring of kSlots buffers; each buffer is hashed and written from
// the same bytes, so what was hashed is what was written.
class WritePipeline {
 public:
  static constexpr int kSlots = 4;

  WritePipeline(int out_fd, absl::string_view what, Env *env)
      : out_fd_(out_fd), what_(what), env_(env) {
    for (auto &b : buffers_) b.reset(new char[kChunk]);
    writer_ = std::thread([this] { WriteLoop(); });
  }
  ~WritePipeline() { (void)Close(); }

  // A free buffer to read into, or nullptr once the writer failed.
  char *Acquire() {
    absl::MutexLock lock(&mu_);
    while (status_.ok() && filled_ - written_ >= kSlots) changed_.Wait(&mu_);
    if (!status_.ok()) return nullptr;
    return buffers_[filled_ % kSlots].get();
  }
  // Queues the buffer from Acquire() holding `n` bytes.
  void Submit(size_t n) {
    absl::MutexLock lock(&mu_);
    sizes_[filled_ % kSlots] = n;
    ++filled_;
    changed_.SignalAll();
  }
  // Waits until everything submitted is written; the first write error.
  absl::Status Close() {
    {
      absl::MutexLock lock(&mu_);
      closed_ = true;
      changed_.SignalAll();
    }
    if (writer_.joinable()) writer_.join();
    absl::MutexLock lock(&mu_);
    return status_;
  }

 private:
  void WriteLoop() {
    uint64_t offset = 0;
    for (;;) {
      size_t n = 0;
      const char *data = nullptr;
      {
        absl::MutexLock lock(&mu_);
        while (filled_ == written_ && !closed_) changed_.Wait(&mu_);
        if (filled_ == written_) return;  // closed and drained
        data = buffers_[written_ % kSlots].get();
        n = sizes_[written_ % kSlots];
      }
      absl::Status s = env_->Write(out_fd_, what_, absl::string_view(data, n));
      // Keep the disk busy while later chunks are read and hashed: start
      // writeback of each 8 MiB window as it fills and wait for the one
      // before it, so the caller's fsync finds at most two windows left
      // instead of the whole file, and dirty memory stays bounded. Advisory;
      // the fsync is what makes it durable.
      const off_t end = static_cast<off_t>(offset + n);
      if (s.ok() && end % kWindow == 0) {
        (void)sync_file_range(out_fd_, end - kWindow, kWindow,
                              SYNC_FILE_RANGE_WRITE);
        if (end >= 2 * kWindow) {
          (void)sync_file_range(out_fd_, end - 2 * kWindow, kWindow,
                                SYNC_FILE_RANGE_WAIT_BEFORE |
                                    SYNC_FILE_RANGE_WRITE |
                                    SYNC_FILE_RANGE_WAIT_AFTER);
        }
      }
      offset += n;
      absl::MutexLock lock(&mu_);
      ++written_;
      changed_.SignalAll();
      if (!s.ok()) {
        status_ = s;
        return;
      }
    }
  }

  const int out_fd_;
  const std::string what_;
  Env *const env_;
  std::unique_ptr<char[]> buffers_[kSlots];
  absl::Mutex mu_;
  // Explicit waits, not Mutex::Await: absl evaluates an Await condition on
  // whichever thread unlocks, reading the waiter's stack, which TSan (with
  // Debian's uninstrumented absl) cannot see ordered.
  absl::CondVar changed_;
  size_t sizes_[kSlots] ABSL_GUARDED_BY(mu_) = {};
  uint64_t filled_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t written_ ABSL_GUARDED_BY(mu_) = 0;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  std::thread writer_;
};

absl::StatusOr<CopyResult> Finish(Sha256 &hash, CopyResult result) {
  absl::StatusOr<std::string> digest = hash.HexDigest();
  if (!digest.ok()) return digest.status();
  result.sha256 = *std::move(digest);
  return result;
}

}  // namespace

absl::StatusOr<CopyResult> CopyAndHash(int in_fd, int out_fd,
                                       absl::string_view what,
                                       const CopyOptions &options) {
  // Advisory: a larger kernel readahead for a source read once, in order.
  (void)posix_fadvise(in_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  const absl::string_view out_name =
      options.out_name.empty() ? what : options.out_name;
  Sha256 hash;
  CopyResult result;
  if (out_fd < 0 || FitsInOneChunk(in_fd)) {
    // Most NEFFs and every verification: read, hash (and write) in this
    // thread through its own buffer, reused from call to call. A fresh
    // buffer per call cost more than the bytes did: under many ranks
    // verifying small entries at once (fallback mode), zero-filling and
    // faulting in a new 1 MiB per lookup starved a restarting daemon of CPU
    // for 45 s (docs/RELIABILITY.md).
    char *buf = ThisThreadsChunk();
    for (;;) {
      absl::StatusOr<size_t> n = ReadChunk(in_fd, buf, what);
      if (!n.ok()) return n.status();
      if (*n == 0) break;
      hash.Update(buf, *n);
      result.size += *n;
      if (out_fd >= 0) {
        if (absl::Status s = options.env->Write(out_fd, out_name,
                                                absl::string_view(buf, *n));
            !s.ok()) {
          return s;
        }
      }
    }
    return Finish(hash, result);
  }
  // Copying more than a chunk: hashing and writing run on two threads, so a
  // publish takes about as long as the slower of the two instead of their
  // sum (and gets two threads' share of a busy machine).
  WritePipeline pipeline(out_fd, out_name, options.env);
  for (;;) {
    char *buf = pipeline.Acquire();
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
    // kernel): copy through a buffer from where the kernel stopped.
    if (errno == EXDEV || errno == ENOSYS || errno == EINVAL ||
        errno == EOPNOTSUPP) {
      break;
    }
    return absl::ErrnoToStatus(errno, absl::StrCat("copying ", what));
  }
  // Rare enough that CopyAndHash's buffered copy, hash and all, will do.
  absl::StatusOr<CopyResult> rest = CopyAndHash(in_fd, out_fd, what);
  if (!rest.ok()) return rest.status();
  return copied + rest->size;
}

}  // namespace neffd
