#include "store/file_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "absl/random/random.h"
#include "absl/strings/cord.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace neffd {

absl::Status WriteAll(int fd, absl::string_view data, absl::string_view what,
                      Env* env) {
  return env->Write(fd, what, data);
}

namespace {

// The parent of `path`: up to its last component, without its slashes; ""
// if it has none.
std::string ParentDir(const std::string& path) {
  const size_t last = path.rfind('/');
  const size_t end = last == std::string::npos
                         ? std::string::npos
                         : path.find_last_not_of('/', last);
  return end == std::string::npos ? "" : path.substr(0, end + 1);
}

// How MakeDirChain treats the directories it creates.
struct Created {
  bool durable = false;     // fsync each one's parent
  bool exact_mode = false;  // chmod each one to `mode` (umask-proof)
};

absl::Status MakeDirChain(const std::string& path, int mode, Created how,
                          Env* env) {
  if (path.empty()) return absl::InvalidArgumentError("empty directory path");
  absl::Status made = env->Mkdir(path, mode);
  const std::string parent = ParentDir(path);
  if (absl::IsNotFound(made)) {
    if (parent.empty()) return made;  // no parent left to make
    if (absl::Status s = MakeDirChain(parent, mode, how, env); !s.ok()) {
      return s;
    }
    made = env->Mkdir(path, mode);
  }
  if (made.ok()) {
    if (how.exact_mode) {
      if (absl::Status s = ChmodDir(path, mode, env); !s.ok()) return s;
    }
    return how.durable && !parent.empty() ? env->SyncDir(parent) : made;
  }
  if (!absl::IsAlreadyExists(made)) return made;
  struct stat st;
  if (absl::Status s = env->Stat(path, &st); !s.ok()) return s;
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " exists and is not a directory"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status MakeDirs(const std::string& path, int mode, Env* env) {
  return MakeDirChain(path, mode, Created{}, env);
}

absl::Status MakeDirsDurably(const std::string& path, int mode, Env* env) {
  return MakeDirChain(path, mode, Created{/*durable=*/true, false}, env);
}

absl::Status MakeGroupDirs(const std::string& path, int mode, Env* env,
                           bool durably) {
  return MakeDirChain(path, mode, Created{durably, /*exact_mode=*/true}, env);
}

absl::Status ChmodDir(const std::string& path, int mode, Env* env) {
  absl::StatusOr<UniqueFd> dir =
      env->Open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0);
  if (!dir.ok()) return dir.status();
  return env->Chmod(dir->get(), path, mode);
}

std::string RandomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  // The kernel's generator, not OpenSSL's: the first RAND_bytes of a
  // process initialises OpenSSL (its config file, its DRBG), about 3 ms
  // that a rank's first publish would wait for after its compile.
  if (getrandom(raw.data(), bytes, 0) != static_cast<ssize_t>(bytes)) {
    // No entropy yet (early boot) or an old kernel: still unique per process.
    thread_local absl::BitGen bits;
    for (char& c : raw) c = static_cast<char>(absl::Uniform<uint8_t>(bits));
  }
  return absl::BytesToHexString(raw);
}

std::string UniqueTempName(absl::string_view base, absl::string_view host) {
  thread_local absl::BitGen bits;
  return absl::StrFormat(".%s.tmp.%s.%d.%016x", base, host, getpid(),
                         absl::Uniform<uint64_t>(bits));
}

absl::Status WriteFileAtomically(const std::string& dir, absl::string_view name,
                                 absl::string_view data, absl::string_view host,
                                 bool durable, Env* env) {
  const std::string tmp = absl::StrCat(dir, "/", UniqueTempName(name, host));
  absl::StatusOr<UniqueFd> fd =
      env->Open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0644);
  if (!fd.ok()) return fd.status();
  absl::Status status = env->Write(fd->get(), tmp, data);
  if (status.ok() && durable) status = env->Sync(fd->get(), tmp);
  if (status.ok()) status = env->Rename(tmp, absl::StrCat(dir, "/", name));
  if (!status.ok()) {
    (void)env->Unlink(tmp);
    return status;
  }
  return durable ? env->SyncDir(dir) : absl::OkStatus();
}

namespace {

constexpr char kDamagePayloadUrl[] = "neffd.dev/damage";

absl::string_view BaseName(absl::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == absl::string_view::npos ? path : path.substr(slash + 1);
}

}  // namespace

absl::Status DamageError(const std::string& path, absl::string_view reason) {
  absl::Status status = absl::DataLossError(
      absl::StrCat(BaseName(path), " ", reason, " (", path, ")"));
  status.SetPayload(kDamagePayloadUrl, absl::Cord(reason));
  return status;
}

bool IsDamage(const absl::Status& status) {
  return status.GetPayload(kDamagePayloadUrl).has_value();
}

absl::string_view FileTypeName(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symlink";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

absl::StatusOr<RegularFile> OpenRegularFile(const std::string& path,
                                            uint64_t max_bytes, Env* env,
                                            int flags) {
  absl::StatusOr<UniqueFd> fd =
      env->Open(path, flags | O_NOFOLLOW | O_NONBLOCK);
  if (!fd.ok()) {
    // ELOOP (a symlink), ENXIO (a socket; absl codes it NotFound), EISDIR,
    // EACCES: say what the file is, from its own metadata, if it is there.
    // The common miss (ENOENT) costs no second call: FsCallError ends
    // with strerror.
    if (absl::EndsWith(fd.status().message(), std::strerror(ENOENT))) {
      return fd.status();
    }
    struct stat st;
    absl::Status there = env->Lstat(path, &st);
    // Gone since the open: a peer quarantined it (or a publish is replacing
    // it). Now there is nothing, a miss, not the open's errno (ELOOP would
    // reach a rank as UNKNOWN).
    if (absl::IsNotFound(there)) return there;
    if (there.ok() && !S_ISREG(st.st_mode)) {
      return DamageError(path, absl::StrCat("is ", FileTypeName(st.st_mode)));
    }
    if (absl::IsPermissionDenied(fd.status())) {
      return DamageError(path, "is not readable by this process");
    }
    return fd.status();
  }
  RegularFile file{*std::move(fd), {}};
  if (absl::Status s = env->Fstat(file.fd.get(), path, &file.st); !s.ok()) {
    return s;
  }
  if (!S_ISREG(file.st.st_mode)) {
    return DamageError(path,
                       absl::StrCat("is ", FileTypeName(file.st.st_mode)));
  }
  if (static_cast<uint64_t>(file.st.st_size) > max_bytes) {
    return DamageError(path, absl::StrCat("is ", file.st.st_size,
                                          " bytes, bound ", max_bytes));
  }
  return file;
}

absl::StatusOr<std::string> ReadSmallFile(const std::string& path,
                                          size_t max_bytes, Env* env) {
  absl::StatusOr<RegularFile> file = OpenRegularFile(path, max_bytes, env);
  if (!file.ok()) return file.status();
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = read(file->fd.get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("reading ", path));
    }
    if (n == 0) break;
    out.append(buf, n);
    if (out.size() > max_bytes) {  // grew after the fstat
      return DamageError(path, absl::StrCat("is more than ", max_bytes,
                                            " bytes, bound ", max_bytes));
    }
  }
  return out;
}

absl::StatusOr<std::string> MoveToQuarantine(const std::string& quarantine_dir,
                                             const std::string& path,
                                             absl::string_view base,
                                             absl::string_view reason,
                                             absl::string_view host, Env* env) {
  const std::string name = UniqueTempName(base, host).substr(1);
  const std::string target = absl::StrCat(quarantine_dir, "/", name);
  if (absl::Status s = MakeGroupDirs(quarantine_dir, kSharedDirMode, env);
      !s.ok()) {
    return s;
  }
  if (absl::Status s = env->Rename(path, target); !s.ok()) return s;
  (void)WriteFileAtomically(quarantine_dir, absl::StrCat(name, ".reason"),
                            absl::StrCat(reason, "\n"), host,
                            /*durable=*/true, env);
  return target;
}

absl::Status RemoveTree(const std::string& path, Env* env) {
  struct stat st;
  if (absl::Status s = env->Lstat(path, &st); !s.ok()) return s;
  if (!S_ISDIR(st.st_mode)) return env->Unlink(path);
  absl::StatusOr<std::vector<std::string>> names = env->ListDir(path);
  if (!names.ok()) return names.status();
  absl::Status first;
  for (const std::string& name : *names) {
    first.Update(RemoveTree(absl::StrCat(path, "/", name), env));
  }
  first.Update(env->Rmdir(path));
  return first;
}

absl::Status ReadOptionFiles(std::initializer_list<OptionFile> files) {
  for (const OptionFile& file : files) {
    absl::StatusOr<std::string> read = ReadSmallFile(*file.path, 1 << 20);
    if (!read.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(file.option, ": cannot read ", *file.path, ": ",
                       read.status().message()));
    }
    *file.content = *std::move(read);
  }
  return absl::OkStatus();
}

absl::Status CheckLocalFilesystem(const std::string& path, Env* env) {
  // statfs(2)'s magic numbers (linux/magic.h; Lustre's from its source).
  constexpr int64_t kNfs = 0x6969;
  constexpr int64_t kLustre = 0x0BD00BD0;
  constexpr int64_t kSmb = 0x517B;
  constexpr int64_t kCifs = 0xFF534D42;
  constexpr int64_t kSmb2 = 0xFE534D42;
  absl::StatusOr<int64_t> type = env->FilesystemType(path);
  if (!type.ok()) return type.status();
  const char* kind = nullptr;
  switch (*type) {
    case kNfs:
      kind = "nfs";
      break;
    case kLustre:
      kind = "lustre";
      break;
    case kSmb:
    case kCifs:
    case kSmb2:
      kind = "smb";
      break;
  }
  if (kind == nullptr) return absl::OkStatus();
  return absl::FailedPreconditionError(
      absl::StrCat(path, " is on ", kind, ", a network filesystem"));
}

}  // namespace neffd
