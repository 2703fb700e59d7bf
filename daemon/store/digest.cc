#include "daemon/store/digest.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "daemon/store/file_util.h"

namespace neffd {

struct Sha256::Ctx {
  EVP_MD_CTX* md = EVP_MD_CTX_new();
  ~Ctx() { EVP_MD_CTX_free(md); }
};

Sha256::Sha256() : ctx_(std::make_unique<Ctx>()) {
  EVP_DigestInit_ex(ctx_->md, EVP_sha256(), nullptr);
}

Sha256::~Sha256() = default;

void Sha256::Update(const void* data, size_t size) {
  EVP_DigestUpdate(ctx_->md, data, size);
}

std::string Sha256::HexDigest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_DigestFinal_ex(ctx_->md, md, &len);
  std::string hex;
  hex.reserve(2 * len);
  for (unsigned int i = 0; i < len; ++i) {
    absl::StrAppendFormat(&hex, "%02x", md[i]);
  }
  return hex;
}

std::string Sha256Hex(absl::string_view data) {
  Sha256 h;
  h.Update(data.data(), data.size());
  return h.HexDigest();
}

bool IsSha256Hex(absl::string_view hex) {
  if (hex.size() != 64) return false;
  for (char c : hex) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

absl::StatusOr<CopyResult> CopyAndHash(int in_fd, int out_fd,
                                       absl::string_view what) {
  // 1 MiB chunks: large enough to amortise syscalls on FSx, small enough to
  // stay in cache while hashing.
  constexpr size_t kChunk = 1 << 20;
  std::vector<char> buf(kChunk);
  Sha256 hash;
  CopyResult result;
  // Advisory: a larger kernel readahead for a source read once, in order.
  (void)posix_fadvise(in_fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  for (;;) {
    ssize_t n = read(in_fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, absl::StrCat("reading ", what));
    }
    if (n == 0) break;
    hash.Update(buf.data(), n);
    if (out_fd >= 0) {
      if (absl::Status s =
              WriteAll(out_fd, absl::string_view(buf.data(), n), what);
          !s.ok()) {
        return s;
      }
      // Start writing this chunk back now, while the next is read and
      // hashed, so the caller's fsync finds little left to do instead of
      // the whole file. Advisory; the fsync is what makes it durable.
      (void)sync_file_range(out_fd, static_cast<off_t>(result.size), n,
                            SYNC_FILE_RANGE_WRITE);
    }
    result.size += n;
  }
  result.sha256 = hash.HexDigest();
  return result;
}

}  // namespace neffd
