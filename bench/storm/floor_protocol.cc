#include "bench/storm/floor_protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>
#include <unistd.h>

#include "absl/time/clock.h"
#include "store/file_util.h"

namespace neffd::bench {
namespace {

absl::Status Fsync(const std::string& path, int flags) {
  UniqueFd fd(open(path.c_str(), flags | O_CLOEXEC));
  if (!fd.valid() || fsync(fd.get()) != 0) {
    return absl::ErrnoToStatus(errno, "fsync " + path);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<DirectResult> FloorGetOrCompile(
    const std::string& entry_dir, bool compiles, bool durable,
    const std::function<void()>& locked,
    const std::function<absl::Status(const std::string&)>& compile) {
  DirectResult result;
  result.neff_path = entry_dir + "/model.neff";
  if (absl::Status s = MakeDirs(entry_dir); !s.ok()) return s;
  const std::string lock = entry_dir + "/floor.lock";
  UniqueFd fd(open(lock.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, "opening " + lock);
  auto take = [&](int how) {
    while (flock(fd.get(), how) != 0) {
      if (errno != EINTR) return absl::ErrnoToStatus(errno, "locking " + lock);
    }
    return absl::OkStatus();
  };
  if (!compiles) {
    if (absl::Status s = take(LOCK_SH); !s.ok()) return s;
    return result;
  }
  if (absl::Status s = take(LOCK_EX); !s.ok()) return s;
  locked();
  const std::string tmp = result.neff_path + ".tmp";
  if (absl::Status s = compile(tmp); !s.ok()) return s;
  if (durable) {
    if (absl::Status s = Fsync(tmp, O_RDONLY); !s.ok()) return s;
  }
  if (rename(tmp.c_str(), result.neff_path.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, "renaming to " + result.neff_path);
  }
  if (durable) {
    if (absl::Status s = Fsync(entry_dir, O_RDONLY | O_DIRECTORY); !s.ok()) {
      return s;
    }
  }
  result.released = absl::Now();
  flock(fd.get(), LOCK_UN);
  return result;
}

}  // namespace neffd::bench
