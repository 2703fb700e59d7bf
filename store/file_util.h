// store/file_util.h
//
// Small filesystem helpers shared by the store, the lock table and the
// client's fallback mode, built on an Env (store/env.h; Env::Default() unless
// the caller passes its own): a chain of directories, a name for a temp file
// no other process picks, the atomic-write protocol (temp name with O_EXCL,
// fsync, rename, fsync of the directory), reading a small file whole and
// removing a tree, and the one way to open a file on the shared store
// (OpenRegularFile). Failed calls return the Env's status, or
// absl::ErrnoToStatus(errno, "{what} {path}"), so ENOSPC/EDQUOT come back
// RESOURCE_EXHAUSTED and callers can tell "disk full" from a bug.
//
// All functions are thread-safe.
#ifndef NEFFD_STORE_FILE_UTIL_H_
#define NEFFD_STORE_FILE_UTIL_H_

#include <fcntl.h>
#include <sys/stat.h>

#include <cstdint>
#include <initializer_list>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/env.h"
#include "store/unique_fd.h"

namespace neffd {

// Writes all of `data` to `fd`; errors name `what`.
absl::Status WriteAll(int fd, absl::string_view data, absl::string_view what,
                      Env* env = Env::Default());

// mkdir -p with `mode` for the directories it creates. An existing `path`
// costs one mkdir and one stat; only missing parents are walked up to.
absl::Status MakeDirs(const std::string& path, int mode = 0755,
                      Env* env = Env::Default());

// MakeDirs, and each directory it creates has its parent fsynced before the
// call returns, so the new names survive a power loss (a name a durable
// file is renamed into must not vanish with its directory).
absl::Status MakeDirsDurably(const std::string& path, int mode = 0755,
                             Env* env = Env::Default());

// The modes of directories that the daemon (the service user) and the ranks
// (users of its group) must each be able to create and use
// (docs/SECURITY.md): group-writable, and setgid so that what is created in
// them keeps the group whoever creates it.
//   kSharedDirMode:  the shared store's directories (others may read).
//   kLocalDirMode:   {local_dir} and its lock directories (others: nothing).
//   kStagingDirMode: {local_dir}/staging, also sticky: a rank cannot remove
//                    another's staged file.
//   kTierDirMode:    {local_dir}/tier and wake, written by the daemon only.
inline constexpr int kSharedDirMode = 02775;
inline constexpr int kLocalDirMode = 02770;
inline constexpr int kStagingDirMode = 03770;
inline constexpr int kTierDirMode = 02750;

// MakeDirs (with `durably`, MakeDirsDurably) for directories shared between
// users: each directory it creates gets exactly `mode` (setgid and group
// bits included, whatever the umask: mkdir(2) applies the umask and drops
// setgid).
absl::Status MakeGroupDirs(const std::string& path, int mode,
                           Env* env = Env::Default(), bool durably = false);

// Sets the directory `path` to exactly `mode`.
absl::Status ChmodDir(const std::string& path, int mode,
                      Env* env = Env::Default());

// `bytes` random bytes from the kernel's CSPRNG (getrandom(2)), as lowercase
// hex: a name no other user can predict.
std::string RandomHex(size_t bytes);

// A name no other process or host will pick: ".{base}.tmp.{host}.{pid}.{rand}".
std::string UniqueTempName(absl::string_view base, absl::string_view host);

// Creates `dir/name` atomically with `data`: temp file (O_EXCL) in `dir`,
// fsync, rename over `name`, fsync `dir`. Readers see the old file or the new
// one, never a partial one; a failure leaves no temp file behind. With
// `durable` false the two fsyncs are skipped: still atomic for readers and
// across a crash of the process, but after a power loss the file may be
// missing or empty — only for files whose loss or damage readers detect and
// survive (a marker they validate).
absl::Status WriteFileAtomically(const std::string& dir, absl::string_view name,
                                 absl::string_view data, absl::string_view host,
                                 bool durable = true,
                                 Env* env = Env::Default());

// A file on the shared store that anyone who can write the store may have
// planted: it is not a regular file (a FIFO, a socket, a symlink, a
// directory, a device), it is larger than its bound, or this process may not
// read it. DataLoss, with a payload IsDamage recognizes, and a message that
// names the file and the reason ("model.done is a FIFO", "model.done is
// 3145728 bytes, bound 1048576"). Callers that may quarantine the file do;
// everyone else treats it as absent. Never a reason to wait or to fail for
// good.
absl::Status DamageError(const std::string& path, absl::string_view reason);
bool IsDamage(const absl::Status& status);

// What a file's type is called in a damage reason: "a FIFO", "a socket",
// "a directory", "a symlink", "a character device", ...
absl::string_view FileTypeName(mode_t mode);

struct RegularFile {
  UniqueFd fd;
  struct stat st;  // fstat of fd
};

// Opens `path` only if it is a regular file of at most `max_bytes`:
// O_NOFOLLOW | O_NONBLOCK (| O_CLOEXEC) with `flags` (O_RDONLY unless
// given), so a planted FIFO neither blocks the open nor a read, and a
// symlink is not followed; then fstat must say S_ISREG. NotFound if `path`
// does not exist (also when it vanished after a failed open); DamageError
// (IsDamage) for every other shape; the Env's error for an I/O failure. The one
// way to open a file of the shared store.
absl::StatusOr<RegularFile> OpenRegularFile(const std::string& path,
                                            uint64_t max_bytes,
                                            Env* env = Env::Default(),
                                            int flags = O_RDONLY);

// The whole content of a regular file of at most `max_bytes`, opened with
// OpenRegularFile (so a planted file is DamageError, never a hang).
absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                          size_t max_bytes,
                                          Env* env = Env::Default());

// A small file a command-line option names (a PEM certificate or key).
struct OptionFile {
  absl::string_view option;  // "--tls_cert"
  const std::string* path;
  std::string* content;  // filled
};

// Reads each file (at most 1 MiB); InvalidArgument naming the option of the
// first that cannot be read.
absl::Status ReadOptionFiles(std::initializer_list<OptionFile> files);

// Renames `path` (a file of any kind, or a directory) into `quarantine_dir`
// (created if missing) under a fresh name built from `base`, and writes
// "{new name}.reason" beside it holding `reason`. Returns the new path.
absl::StatusOr<std::string> MoveToQuarantine(const std::string& quarantine_dir,
                                             const std::string& path,
                                             absl::string_view base,
                                             absl::string_view reason,
                                             absl::string_view host,
                                             Env* env = Env::Default());

// Removes `path` and, if it is a directory, everything under it, without
// following symlinks. Best effort: what cannot be removed stays; the first
// failure is returned.
absl::Status RemoveTree(const std::string& path, Env* env = Env::Default());

// OK if `path` is on a local filesystem; FailedPrecondition naming the kind
// ("nfs", "lustre", "smb") if it is on a network one, whose flock(2) the
// host-local locks cannot rely on; NotFound (or another errno status) naming
// `path` if it cannot be looked at.
absl::Status CheckLocalFilesystem(const std::string& path,
                                  Env* env = Env::Default());

}  // namespace neffd

#endif  // NEFFD_STORE_FILE_UTIL_H_
