#include "store/file_util.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/random/random.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace neffd {

absl::Status WriteAll(int fd, absl::string_view data, absl::string_view what,
                      Env *env) {
  return env->Write(fd, what, data);
}

namespace {

// The parent of `path`: up to its last component, without its slashes; ""
// if it has none.
std::string ParentDir(const std::string &path) {
  const size_t last = path.rfind('/');
  const size_t end = last == std::string::npos
                         ? std::string::npos
                         : path.find_last_not_of('/', last);
  return end == std::string::npos ? "" : path.substr(0, end + 1);
}

absl::Status MakeDirChain(const std::string &path, int mode, bool durable,
                          Env *env) {
  if (path.empty()) return absl::InvalidArgumentError("empty directory path");
  absl::Status made = env->Mkdir(path, mode);
  const std::string parent = ParentDir(path);
  if (absl::IsNotFound(made)) {
    if (parent.empty()) return made;  // no parent left to make
    if (absl::Status s = MakeDirChain(parent, mode, durable, env); !s.ok()) {
      return s;
    }
    made = env->Mkdir(path, mode);
  }
  if (made.ok()) {
    return durable && !parent.empty() ? env->SyncDir(parent) : made;
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

absl::Status MakeDirs(const std::string &path, int mode, Env *env) {
  return MakeDirChain(path, mode, /*durable=*/false, env);
}

absl::Status MakeDirsDurably(const std::string &path, int mode, Env *env) {
  return MakeDirChain(path, mode, /*durable=*/true, env);
}

std::string UniqueTempName(absl::string_view base, absl::string_view host) {
  thread_local absl::BitGen bits;
  return absl::StrFormat(".%s.tmp.%s.%d.%016x", base, host, getpid(),
                         absl::Uniform<uint64_t>(bits));
}

absl::Status WriteFileAtomically(const std::string &dir, absl::string_view name,
                                 absl::string_view data, absl::string_view host,
                                 bool durable, Env *env) {
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

absl::StatusOr<std::string> ReadSmallFile(const std::string &path,
                                          size_t max_bytes, Env *env) {
  absl::StatusOr<UniqueFd> fd = env->Open(path, O_RDONLY | O_NOFOLLOW);
  if (!fd.ok()) return fd.status();
  std::string out;
  char buf[8192];
  for (;;) {
    ssize_t n = read(fd->get(), buf, sizeof(buf));
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::ErrnoToStatus(errno, absl::StrCat("reading ", path));
    }
    if (n == 0) break;
    out.append(buf, n);
    if (out.size() > max_bytes) {
      return absl::FailedPreconditionError(
          absl::StrCat(path, " is larger than ", max_bytes, " bytes"));
    }
  }
  return out;
}

absl::Status RemoveTree(const std::string &path, Env *env) {
  struct stat st;
  if (absl::Status s = env->Lstat(path, &st); !s.ok()) return s;
  if (!S_ISDIR(st.st_mode)) return env->Unlink(path);
  absl::StatusOr<std::vector<std::string>> names = env->ListDir(path);
  if (!names.ok()) return names.status();
  absl::Status first;
  for (const std::string &name : *names) {
    first.Update(RemoveTree(absl::StrCat(path, "/", name), env));
  }
  first.Update(env->Rmdir(path));
  return first;
}

}  // namespace neffd
