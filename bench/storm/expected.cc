#include "bench/storm/expected.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "examples/fake_compiler.h"
#include "store/file_util.h"

namespace neffd::bench {

std::string GraphKey(int g) { return absl::StrCat("storm", g); }

absl::Status WriteExpected(const std::string& dir, int graphs, int64_t bytes) {
  if (absl::Status s = MakeDirs(dir); !s.ok()) return s;
  for (int g = 0; g < graphs; ++g) {
    const std::string name = absl::StrCat(GraphKey(g), ".", bytes);
    struct stat st;
    if (stat(absl::StrCat(dir, "/", name).c_str(), &st) == 0 &&
        st.st_size == bytes) {
      continue;
    }
    if (absl::Status s = WriteFileAtomically(
            dir, name, examples::FakeNeffBytes(GraphKey(g), bytes), "storm");
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status ReadWhole(const std::string& path, std::string* buffer) {
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0) {
    return ErrnoStatus(errno, "reading " + path);
  }
  buffer->resize(st.st_size);  // no allocation once the buffer has grown
  size_t done = 0;
  while (done < buffer->size()) {
    ssize_t n =
        pread(fd.get(), buffer->data() + done, buffer->size() - done, done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus(n < 0 ? errno : EIO, "reading " + path);
    done += n;
  }
  return absl::OkStatus();
}

bool MatchesExpected(const std::string& dir, const std::string& key,
                     absl::string_view content) {
  const std::string path = absl::StrCat(dir, "/", key, ".", content.size());
  UniqueFd fd(open(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (!fd.valid() || fstat(fd.get(), &st) != 0 ||
      static_cast<size_t>(st.st_size) != content.size()) {
    return false;
  }
  if (content.empty()) return true;
  void* map = mmap(nullptr, content.size(), PROT_READ, MAP_SHARED, fd.get(), 0);
  if (map == MAP_FAILED) return false;
  const bool same = std::memcmp(map, content.data(), content.size()) == 0;
  munmap(map, content.size());
  return same;
}

}  // namespace neffd::bench
