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
  Sha256(const Sha256 &) = delete;
  Sha256 &operator=(const Sha256 &) = delete;

  void Update(const void *data, size_t size);
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
  Env *env = Env::Default();
  absl::string_view out_name;
};

// Reads `in_fd` from its current offset to EOF, writing everything to
// `out_fd` (skipped when out_fd < 0), and returns the size and digest of what
// was read. Errors name the file and the errno.
absl::StatusOr<CopyResult> CopyAndHash(int in_fd, int out_fd,
                                       absl::string_view what,
                                       const CopyOptions &options = {});

// Copies everything from `in_fd`'s offset to its end onto `out_fd` without
// hashing, inside the kernel where it can (copy_file_range); returns the
// bytes copied. For copies someone else verifies.
absl::StatusOr<uint64_t> CopyFileContents(int in_fd, int out_fd,
                                          absl::string_view what);

}  // namespace neffd

#endif  // NEFFD_STORE_DIGEST_H_
