#include "bench/storm/legacy_protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/storm/expected.h"
#include "store/file_util.h"

namespace neffd::bench {
namespace {

bool Exists(const std::string& path, LegacyCounters* c) {
  ++c->metadata_ops;
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

}  // namespace

absl::Status LegacyRead(const std::string& neff_path, std::string* content,
                        LegacyCounters* c) {
  ++c->metadata_ops;
  absl::Status read = ReadWhole(neff_path, content);
  if (read.ok()) c->bytes_read += content->size();
  return read;
}

absl::StatusOr<DirectResult> LegacyGetOrCompile(
    const std::string& entry_dir, absl::Duration poll_interval,
    const std::function<absl::Status(const std::string&)>& compile,
    LegacyCounters* c) {
  const std::string neff = entry_dir + "/model.neff";
  const std::string done = entry_dir + "/model.done";
  const std::string lock = entry_dir + "/model.hlo_module.pb.lock";
  DirectResult result;
  result.neff_path = neff;
  for (;;) {
    if (Exists(done, c)) break;
    ++c->metadata_ops;
    if (absl::Status s = MakeDirs(entry_dir); !s.ok()) return s;
    ++c->metadata_ops;
    int fd = open(lock.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0) {
      if (errno != EEXIST)
        return absl::ErrnoToStatus(errno, "creating " + lock);
      absl::SleepFor(poll_interval);  // someone compiles: poll for done
      continue;
    }
    close(fd);
    if (Exists(done, c)) {  // published between our check and our lock
      ++c->metadata_ops;
      unlink(lock.c_str());
      break;
    }
    const std::string tmp = neff + absl::StrCat(".tmp.", getpid());
    if (absl::Status s = compile(tmp); !s.ok()) return s;
    c->metadata_ops += 4;  // rename neff, create done, unlink lock, (fsync)
    rename(tmp.c_str(), neff.c_str());
    // Released as the NEFF is in place, the moment the storm takes as the
    // release in every mode; model.done follows within microseconds.
    result.released = absl::Now();
    close(open(done.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0644));
    unlink(lock.c_str());
    break;
  }
  return result;
}

}  // namespace neffd::bench
