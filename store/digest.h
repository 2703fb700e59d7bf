// store/digest.h
//
// SHA-256 (OpenSSL EVP) in the form the cache uses everywhere: lowercase hex.
// Sha256 hashes a stream incrementally; the free functions hash whole inputs.
// Every OpenSSL call is checked: a digest that could not be computed is an
// Internal error, never a wrong digest. CopyAndHash moves bytes between
// descriptors while hashing them, so a publish reads its source exactly once
// (the writes go through an Env, store/env.h, so tests can fail them);
// CopyFileContents moves them without hashing, for copies the daemon
// verifies anyway.
//
// What a copy costs is its bytes, not its set-up: no call allocates a buffer
// or starts a thread. Each thread hashes through one chunk buffer of its own,
// allocated at its first copy; a copy of more than one chunk hands its
// writes to one of the process's writer threads, started when every one was
// busy and kept for the process's life, through a ring of buffers likewise
// kept.
//
// A file whose every byte this process has hashed (RememberVerified, keyed
// by its identity: device, inode, size, mtime and ctime) is copied by the
// kernel (Env::CopyRange: copy_file_range, a reflink where the filesystem
// has them) and not hashed again: CopyAndHash returns the remembered digest
// if the file still has that identity after the copy, and Unavailable if it
// changed meanwhile. Only for files nobody else can write (the daemon's
// tier copies): a writer sharing the daemon's uid could change one within
// the filesystem's timestamp granularity unseen.
//
// Sha256 is thread-compatible; the functions are thread-safe.
#ifndef NEFFD_STORE_DIGEST_H_
#define NEFFD_STORE_DIGEST_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/env.h"

namespace neffd {

class Sha256 {
 public:
  Sha256();
  ~Sha256();
  Sha256(const Sha256&) = delete;
  Sha256& operator=(const Sha256&) = delete;

  void Update(const void* data, size_t size);
  // Lowercase hex; Internal if an OpenSSL call failed at any step. The
  // object must not be used afterwards.
  absl::StatusOr<std::string> HexDigest();

 private:
  struct Ctx;
  std::unique_ptr<Ctx> ctx_;
  bool failed_ = false;  // an OpenSSL call failed
};

// The digest of `data`, or "" if OpenSSL failed (no digest is empty, so it
// matches nothing). For code that compares digests; Sha256 says why.
std::string Sha256Hex(absl::string_view data);

// True if `hex` is 64 lowercase hex digits.
bool IsSha256Hex(absl::string_view hex);

struct CopyResult {
  uint64_t size = 0;
  std::string sha256;
};

// How CopyAndHash writes: through `env`, to a file it names `out_name` in
// errors and to Env wrappers (empty: the source's `what`).
struct CopyOptions {
  Env* env = Env::Default();
  absl::string_view out_name;
  // The caller fsyncs out_fd after the copy: a copy of more than a chunk
  // also flushes it (Env::Sync) in the background every 16 MiB, so that
  // fsync finds little left. An error of such a flush fails the copy.
  bool sync_out_behind = false;
};

// A second file a copy writes every byte to, from the same buffer as the
// first, so one read and one hash make two verified copies; `name` in
// errors and to Env wrappers. fd < 0: none. `sync_behind` as
// CopyOptions::sync_out_behind.
struct CopyTee {
  int fd = -1;
  absl::string_view name;
  bool sync_behind = false;
};

// Reads `in_fd` from its current offset to EOF, writing everything to
// `out_fd` (skipped when out_fd < 0) and to `tee` (if it names a file), and
// returns the size and digest of what was read. Errors name the file and
// the errno.
absl::StatusOr<CopyResult> CopyAndHash(int in_fd, int out_fd,
                                       absl::string_view what,
                                       const CopyOptions& options = {},
                                       const CopyTee& tee = {});

// The size and sha256 of the file at `path` (a symlink is not followed).
absl::StatusOr<CopyResult> HashFile(const std::string& path);

// Records that the regular file open as `fd`, as it is now, holds `content`
// (its size and sha256, which the caller computed from every byte of it).
// The 64 most recent are kept. No-op if `fd` cannot be stat'ed.
void RememberVerified(int fd, const CopyResult& content);
// Forgets what RememberVerified recorded for the file open as `fd`.
void ForgetVerified(int fd);

// Copies everything from `in_fd`'s offset to its end onto `out_fd` without
// hashing, inside the kernel where it can (copy_file_range); returns the
// bytes copied. For copies someone else verifies.
absl::StatusOr<uint64_t> CopyFileContents(int in_fd, int out_fd,
                                          absl::string_view what);

}  // namespace neffd

#endif  // NEFFD_STORE_DIGEST_H_
