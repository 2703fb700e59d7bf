#include "bench/storm/expected.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "store/file_util.h"

namespace neffd::bench {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kStamp = 16;  // graph and page index, 8 bytes each

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

void Stamp(int g, size_t page, char* at, size_t room) {
  const uint64_t words[2] = {static_cast<uint64_t>(g), page};
  std::memcpy(at, words, std::min(room, kStamp));
}

}  // namespace

std::string GraphKey(int g) { return absl::StrCat("storm", g); }

absl::Duration CompileTime(absl::Duration base, double jitter, uint64_t seed,
                           int g) {
  const double u =
      (SplitMix64(seed * 1000003 + g) >> 11) * (1.0 / (1ULL << 53));
  return base * (1 - jitter + 2 * jitter * u);
}

std::vector<int> GraphOrder(int graphs, int seed, int64_t rank) {
  std::vector<int> order(graphs);
  for (int g = 0; g < graphs; ++g) order[g] = g;
  if (seed >= 0) {
    std::mt19937 rng(seed + rank);
    std::shuffle(order.begin(), order.end(), rng);
  }
  return order;
}

StormNeff::StormNeff(size_t size) : base_(size, '\0') {
  uint64_t state = 0x5eed;
  for (size_t i = 0; i < size; i += 8) {
    const uint64_t word = SplitMix64(state++);
    std::memcpy(base_.data() + i, &word, std::min<size_t>(8, size - i));
  }
  stamped_ = base_;
}

absl::string_view StormNeff::Bytes(int g) {
  if (g != stamped_graph_) {
    for (size_t page = 0; page * kPage < stamped_.size(); ++page) {
      Stamp(g, page, stamped_.data() + page * kPage,
            stamped_.size() - page * kPage);
    }
    stamped_graph_ = g;
  }
  return stamped_;
}

bool StormNeff::PageMatches(int g, absl::string_view content,
                            size_t page) const {
  const size_t at = page * kPage;
  const size_t len = std::min(kPage, content.size() - at);
  char stamp[kStamp];
  Stamp(g, page, stamp, len);
  const size_t stamped = std::min(len, kStamp);
  return std::memcmp(content.data() + at, stamp, stamped) == 0 &&
         std::memcmp(content.data() + at + stamped, base_.data() + at + stamped,
                     len - stamped) == 0;
}

bool StormNeff::LooksLike(int g, absl::string_view content) const {
  if (content.size() != base_.size()) return false;
  if (content.empty()) return true;
  const size_t last = (content.size() - 1) / kPage;
  return PageMatches(g, content, 0) && PageMatches(g, content, last);
}

bool StormNeff::Matches(int g, absl::string_view content) const {
  if (content.size() != base_.size()) return false;
  for (size_t page = 0; page * kPage < content.size(); ++page) {
    if (!PageMatches(g, content, page)) return false;
  }
  return true;
}

absl::Status ReadWhole(const std::string& path, std::string* buffer) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, "reading " + path);
  }
  buffer->resize(st.st_size);  // no allocation once the buffer has grown
  size_t done = 0;
  while (done < buffer->size()) {
    ssize_t n =
        pread(fd.get(), buffer->data() + done, buffer->size() - done, done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      return absl::ErrnoToStatus(n < 0 ? errno : EIO, "reading " + path);
    done += n;
  }
  return absl::OkStatus();
}

}  // namespace neffd::bench
