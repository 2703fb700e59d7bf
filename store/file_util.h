// store/file_util.h
//
// Small filesystem helpers shared by the store, the lock table and the
// client's fallback mode, built on an Env (store/env.h; Env::Default() unless
// the caller passes its own): a chain of directories, a name for a temp file
// no other process picks, the atomic-write protocol (temp name with O_EXCL,
// fsync, rename, fsync of the directory), reading a small file whole and
// removing a tree. Failed calls return the Env's status, or
// absl::ErrnoToStatus(errno, "{what} {path}"), so ENOSPC/EDQUOT come back
// RESOURCE_EXHAUSTED and callers can tell "disk full" from a bug.
//
// All functions are thread-safe.
#ifndef NEFFD_STORE_FILE_UTIL_H_
#define NEFFD_STORE_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/env.h"
#include "store/unique_fd.h"

namespace neffd {

// Writes all of `data` to `fd`; errors name `what`.
absl::Status WriteAll(int fd, absl::string_view data, absl::string_view what,
                      Env *env = Env::Default());

// mkdir -p with `mode` for the directories it creates. An existing `path`
// costs one mkdir and one stat; only missing parents are walked up to.
absl::Status MakeDirs(const std::string &path, int mode = 0755,
                      Env *env = Env::Default());

// MakeDirs, and each directory it creates has its parent fsynced before the
// call returns, so the new names survive a power loss (a name a durable
// file is renamed into must not vanish with its directory).
absl::Status MakeDirsDurably(const std::string &path, int mode = 0755,
                             Env *env = Env::Default());

// A name no other process or host will pick: ".{base}.tmp.{host}.{pid}.{rand}".
std::string UniqueTempName(absl::string_view base, absl::string_view host);

// Creates `dir/name` atomically with `data`: temp file (O_EXCL) in `dir`,
// fsync, rename over `name`, fsync `dir`. Readers see the old file or the new
// one, never a partial one; a failure leaves no temp file behind. With
// `durable` false the two fsyncs are skipped: still atomic for readers and
// across a crash of the process, but after a power loss the file may be
// missing or empty — only for files whose loss or damage readers detect and
// survive (a marker they validate).
absl::Status WriteFileAtomically(const std::string &dir, absl::string_view name,
                                 absl::string_view data, absl::string_view host,
                                 bool durable = true,
                                 Env *env = Env::Default());

// The whole content of a regular file (not following a final symlink).
absl::StatusOr<std::string> ReadSmallFile(const std::string &path,
                                          size_t max_bytes,
                                          Env *env = Env::Default());

// Removes `path` and, if it is a directory, everything under it, without
// following symlinks. Best effort: what cannot be removed stays; the first
// failure is returned.
absl::Status RemoveTree(const std::string &path, Env *env = Env::Default());

}  // namespace neffd

#endif  // NEFFD_STORE_FILE_UTIL_H_
