#include "client/neffcc/outputs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <iterator>
#include <tuple>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "store/file_util.h"
#include "store/unique_fd.h"

namespace neffd::neffcc {
namespace {

constexpr char kMagic[] = "NEFFCC-BUNDLE 1\n";
constexpr size_t kMaxHeaderBytes = 64 << 10;

// Copies `size` bytes at `offset` of `in` to the end of `out`.
absl::Status CopyRange(int in, uint64_t offset, uint64_t size, int out,
                       const std::string& what) {
  loff_t in_offset = offset;
  while (size > 0) {
    ssize_t n = copy_file_range(in, &in_offset, out, nullptr, size, 0);
    if (n < 0 && (errno == EXDEV || errno == EINVAL || errno == ENOSYS ||
                  errno == EOPNOTSUPP)) {
      char buffer[1 << 16];
      n = pread(in, buffer, std::min<uint64_t>(size, sizeof(buffer)),
                in_offset);
      if (n > 0) {
        if (absl::Status s = WriteAll(out, absl::string_view(buffer, n), what);
            !s.ok()) {
          return s;
        }
        in_offset += n;
      }
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return absl::ErrnoToStatus(errno, "copying " + what);
    if (n == 0) return absl::DataLossError(what + " is shorter than recorded");
    size -= n;
  }
  return absl::OkStatus();
}

// Writes `size` bytes at `offset` of `in` as the new file `target` (built
// beside it and renamed over it, so nobody sees a partial file). `whole`:
// the range is all of `in`, which a reflink can share.
absl::Status PlaceRange(int in, uint64_t offset, uint64_t size, bool whole,
                        const std::string& target) {
  const std::string temp = absl::StrCat(
      DirName(target), "/", UniqueTempName(BaseName(target), "neffcc"));
  UniqueFd out(open(temp.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    0666));
  if (!out.valid()) return absl::ErrnoToStatus(errno, "writing " + target);
  absl::Status copied = absl::OkStatus();
  if (!whole || ioctl(out.get(), FICLONE, in) != 0) {
    copied = CopyRange(in, offset, size, out.get(), target);
  }
  if (copied.ok() && rename(temp.c_str(), target.c_str()) != 0) {
    copied = absl::ErrnoToStatus(errno, "writing " + target);
  }
  if (!copied.ok()) unlink(temp.c_str());
  return copied;
}

bool PlainName(absl::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find_first_of("/\n ") == absl::string_view::npos;
}

bool IsCompilerLog(absl::string_view name) {
  return std::find(std::begin(kCompilerLogs), std::end(kCompilerLogs), name) !=
         std::end(kCompilerLogs);
}

absl::Status AddDir(const std::string& dir, SideOutput::Place place,
                    const std::string& skip, std::vector<SideOutput>& out) {
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return absl::ErrnoToStatus(errno, "listing " + dir);
  absl::Status status = absl::OkStatus();
  while (dirent* e = readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == ".." || name == skip) continue;
    if (place == SideOutput::Place::kCwd && IsCompilerLog(name)) continue;
    struct stat st;
    const std::string path = dir + "/" + name;
    if (lstat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
        !PlainName(name)) {
      status = absl::FailedPreconditionError(absl::StrCat(
          "the compiler wrote '", name, "', which is not a plain file"));
      break;
    }
    out.push_back(SideOutput{place, name, path, uint64_t(st.st_size)});
  }
  closedir(d);
  return status;
}

struct Member {
  std::string place;  // "output", "cwd", "beside"
  std::string name;
  uint64_t size = 0;
};

// The bundle's members and where their bytes start; an empty list when
// `fd` holds a plain NEFF.
absl::StatusOr<std::vector<Member>> ReadHeader(int fd, uint64_t file_size,
                                               uint64_t& data_offset) {
  // A hit on a plain NEFF reads only the magic's length.
  std::string head(std::min<uint64_t>(file_size, sizeof(kMagic) - 1), '\0');
  ssize_t n = pread(fd, head.data(), head.size(), 0);
  if (n < 0) return absl::ErrnoToStatus(errno, "reading the cached result");
  head.resize(n);
  if (head != kMagic) return std::vector<Member>{};
  head.resize(std::min<uint64_t>(file_size, kMaxHeaderBytes));
  n = pread(fd, head.data(), head.size(), 0);
  if (n < 0) return absl::ErrnoToStatus(errno, "reading the cached result");
  head.resize(n);
  const size_t end = head.find("\n\n");
  if (end == std::string::npos) {
    return absl::DataLossError("the cached bundle's header has no end");
  }
  std::vector<Member> members;
  uint64_t total = end + 2;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(head).substr(
                          sizeof(kMagic) - 1, end - (sizeof(kMagic) - 1)),
                      '\n')) {
    std::vector<std::string> fields = absl::StrSplit(line, ' ');
    Member m;
    if (fields.size() < 2 || !absl::SimpleAtoi(fields[0], &m.size)) {
      return absl::DataLossError("a bad line in the cached bundle's header");
    }
    m.place = fields[1];
    if (fields.size() == 3) m.name = fields[2];
    const bool ok = (m.place == "output" && fields.size() == 2)
                        ? members.empty()
                        : (m.place == "cwd" || m.place == "beside") &&
                              fields.size() == 3 && PlainName(m.name);
    if (!ok) return absl::DataLossError("a bad member in the cached bundle");
    total += m.size;
    members.push_back(std::move(m));
  }
  if (members.empty() || members[0].place != "output" || total != file_size) {
    return absl::DataLossError("the cached bundle does not add up");
  }
  data_offset = end + 2;
  return members;
}

}  // namespace

std::string DirName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash);
}

std::string BaseName(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

absl::StatusOr<std::vector<SideOutput>> CollectSideOutputs(
    const std::string& cwd_dir, const std::string& out_dir,
    const std::string& output_name) {
  std::vector<SideOutput> sides;
  if (absl::Status s = AddDir(cwd_dir, SideOutput::Place::kCwd, "", sides);
      !s.ok()) {
    return s;
  }
  if (absl::Status s =
          AddDir(out_dir, SideOutput::Place::kBeside, output_name, sides);
      !s.ok()) {
    return s;
  }
  uint64_t bytes = 0;
  for (const SideOutput& side : sides) bytes += side.size;
  if (sides.size() > kMaxSideOutputs || bytes > kMaxSideOutputBytes) {
    return absl::FailedPreconditionError(
        absl::StrCat("the compiler wrote ", sides.size(), " side outputs of ",
                     bytes, " bytes, over neffcc's bound of ", kMaxSideOutputs,
                     " and ", kMaxSideOutputBytes, " bytes"));
  }
  // One order for one result, whatever the directory's.
  std::sort(sides.begin(), sides.end(), [](const auto& a, const auto& b) {
    return std::tie(a.place, a.name) < std::tie(b.place, b.name);
  });
  return sides;
}

absl::Status WriteArtifact(const std::string& neff,
                           const std::vector<SideOutput>& sides,
                           const std::string& artifact) {
  if (sides.empty()) {
    if (rename(neff.c_str(), artifact.c_str()) != 0) {
      return absl::ErrnoToStatus(errno, "moving " + neff);
    }
    return absl::OkStatus();
  }
  struct stat st;
  if (stat(neff.c_str(), &st) != 0) {
    return absl::ErrnoToStatus(errno, "the compiler's output " + neff);
  }
  std::string header = absl::StrCat(kMagic, st.st_size, " output\n");
  std::vector<std::string> paths = {neff};
  for (const SideOutput& side : sides) {
    absl::StrAppend(&header, side.size, " ",
                    side.place == SideOutput::Place::kCwd ? "cwd" : "beside",
                    " ", side.name, "\n");
    paths.push_back(side.path);
  }
  header += "\n";
  UniqueFd out(open(artifact.c_str(),
                    O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                    0644));
  if (!out.valid()) return absl::ErrnoToStatus(errno, "writing " + artifact);
  if (absl::Status s = WriteAll(out.get(), header, artifact); !s.ok()) return s;
  for (size_t i = 0; i < paths.size(); ++i) {
    UniqueFd in(open(paths[i].c_str(), O_RDONLY | O_CLOEXEC));
    const uint64_t size = i == 0 ? uint64_t(st.st_size) : sides[i - 1].size;
    if (!in.valid()) return absl::ErrnoToStatus(errno, "reading " + paths[i]);
    if (absl::Status s = CopyRange(in.get(), 0, size, out.get(), paths[i]);
        !s.ok()) {
      return s;
    }
  }
  return absl::OkStatus();
}

absl::Status PlaceResult(const std::string& artifact, const std::string& output,
                         const std::string& cwd) {
  UniqueFd in(open(artifact.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (!in.valid() || fstat(in.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, "opening " + artifact);
  }
  uint64_t offset = 0;
  absl::StatusOr<std::vector<Member>> members =
      ReadHeader(in.get(), st.st_size, offset);
  if (!members.ok()) return members.status();
  if (members->empty()) {
    return PlaceRange(in.get(), 0, st.st_size, /*whole=*/true, output);
  }
  for (const Member& m : *members) {
    const std::string target = m.place == "output" ? output
                               : m.place == "cwd"
                                   ? absl::StrCat(cwd, "/", m.name)
                                   : absl::StrCat(DirName(output), "/", m.name);
    if (absl::Status s = PlaceRange(in.get(), offset, m.size, false, target);
        !s.ok()) {
      return s;
    }
    offset += m.size;
  }
  return absl::OkStatus();
}

absl::Status PlaceFile(const std::string& source, const std::string& target) {
  UniqueFd in(open(source.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st;
  if (!in.valid() || fstat(in.get(), &st) != 0) {
    return absl::ErrnoToStatus(errno, "opening " + source);
  }
  return PlaceRange(in.get(), 0, st.st_size, /*whole=*/true, target);
}

}  // namespace neffd::neffcc
