#include "bench/storm/floor_protocol.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/file.h>

#include "absl/time/clock.h"
#include "store/env.h"
#include "store/file_util.h"

namespace neffd::bench {

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
  Env* env = Env::Default();
  if (durable) {
    absl::StatusOr<UniqueFd> written = env->Open(tmp, O_RDONLY);
    if (!written.ok()) return written.status();
    if (absl::Status s = env->Sync(written->get(), tmp); !s.ok()) return s;
  }
  if (rename(tmp.c_str(), result.neff_path.c_str()) != 0) {
    return absl::ErrnoToStatus(errno, "renaming to " + result.neff_path);
  }
  if (durable) {
    if (absl::Status s = env->SyncDir(entry_dir); !s.ok()) return s;
  }
  result.released = absl::Now();
  flock(fd.get(), LOCK_UN);
  return result;
}

}  // namespace neffd::bench
