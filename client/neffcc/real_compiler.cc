#include "client/neffcc/real_compiler.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "store/digest.h"
#include "store/file_util.h"

extern char** environ;

namespace neffd::neffcc {
namespace {

constexpr size_t kMaxVersionCacheBytes = 4096;

std::string RealPath(const std::string& path) {
  char resolved[PATH_MAX];
  return realpath(path.c_str(), resolved) == nullptr ? "" : resolved;
}

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
         access(path.c_str(), X_OK) == 0;
}

std::vector<char*> CArgv(const std::vector<std::string>& argv) {
  std::vector<char*> out;
  for (const std::string& arg : argv) out.push_back(const_cast<char*>(&arg[0]));
  out.push_back(nullptr);
  return out;
}

// What a cached version is valid for: the resolved file's size and mtime.
std::string FileStamp(const struct stat& st) {
  return absl::StrCat(
      st.st_size, " ",
      int64_t{st.st_mtim.tv_sec} * 1000000000 + st.st_mtim.tv_nsec);
}

// Keeps the last kMaxCapturedBytes of what is appended.
void AppendTail(std::string& tail, absl::string_view data) {
  tail.append(data.data(), data.size());
  if (tail.size() > 2 * kMaxCapturedBytes) {
    tail.erase(0, tail.size() - kMaxCapturedBytes);
  }
}

}  // namespace

std::string SelfExecutable() { return RealPath("/proc/self/exe"); }

absl::StatusOr<std::string> FindRealCompiler(absl::string_view configured,
                                             absl::string_view name,
                                             absl::string_view path_env,
                                             absl::string_view self) {
  if (!configured.empty()) {
    const std::string path(configured);
    if (!IsExecutableFile(path)) {
      return absl::NotFoundError(
          absl::StrCat("the compiler ", path, " is not an executable file"));
    }
    if (RealPath(path) == self) {
      return absl::NotFoundError(
          absl::StrCat("the compiler ", path, " is neffcc itself, not ", name));
    }
    return path;
  }
  bool saw_self = false;
  for (absl::string_view dir : absl::StrSplit(path_env, ':')) {
    const std::string candidate =
        absl::StrCat(dir.empty() ? "." : dir, "/", name);
    if (!IsExecutableFile(candidate)) continue;
    if (RealPath(candidate) != self) return candidate;
    saw_self = true;
  }
  return absl::NotFoundError(
      absl::StrCat(saw_self ? "no real " : "no ", name, " on PATH",
                   saw_self ? " (every one found is neffcc itself)" : "",
                   "; install the Neuron compiler or set NEFFD_REAL_COMPILER"));
}

absl::StatusOr<std::string> ParseCompilerVersion(absl::string_view output) {
  for (absl::string_view token :
       absl::StrSplit(output, absl::ByAnyChar(" \t\r\n"), absl::SkipEmpty())) {
    if (absl::ascii_isdigit(token[0]) &&
        token.find('.') != absl::string_view::npos) {
      return std::string(token);
    }
  }
  return absl::NotFoundError("no version number in its --version output");
}

absl::StatusOr<std::string> CompilerVersion(const std::string& compiler,
                                            const std::string& cache_dir) {
  const std::string resolved = RealPath(compiler);
  struct stat st;
  if (resolved.empty() || stat(resolved.c_str(), &st) != 0) {
    return absl::ErrnoToStatus(errno, "resolving " + compiler);
  }
  const std::string stamp = FileStamp(st);
  const std::string cache_name = Sha256Hex(resolved);
  absl::StatusOr<std::string> cached = ReadSmallFile(
      absl::StrCat(cache_dir, "/", cache_name), kMaxVersionCacheBytes);
  if (cached.ok()) {
    std::pair<std::string, std::string> lines = absl::StrSplit(*cached, '\n');
    if (lines.first == stamp && !lines.second.empty()) {
      return std::string(absl::StripTrailingAsciiWhitespace(lines.second));
    }
  }
  absl::StatusOr<CompilerRun> run =
      RunCompiler({compiler, "--version"}, /*pass_through=*/false);
  if (!run.ok()) return run.status();
  if (!WIFEXITED(run->wait_status) || WEXITSTATUS(run->wait_status) != 0) {
    return absl::UnavailableError(
        absl::StrCat(compiler, " --version failed: ", run->output));
  }
  absl::StatusOr<std::string> version = ParseCompilerVersion(run->output);
  if (!version.ok()) {
    return absl::Status(
        version.status().code(),
        absl::StrCat(compiler, ": ", version.status().message()));
  }
  if (MakeDirs(cache_dir).ok()) {
    (void)WriteFileAtomically(cache_dir, cache_name,
                              absl::StrCat(stamp, "\n", *version, "\n"),
                              "neffcc", /*durable=*/false);
  }
  return version;
}

absl::StatusOr<CompilerRun> RunCompiler(const std::vector<std::string>& argv,
                                        bool pass_through,
                                        const std::string& cwd) {
  int out_pipe[2], err_pipe[2];
  if (pipe2(out_pipe, O_CLOEXEC) != 0)
    return absl::ErrnoToStatus(errno, "pipe");
  if (pipe2(err_pipe, O_CLOEXEC) != 0) {
    close(out_pipe[0]);
    close(out_pipe[1]);
    return absl::ErrnoToStatus(errno, "pipe");
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, err_pipe[1], STDERR_FILENO);
  if (!cwd.empty()) {
    posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  }
  std::vector<char*> args = CArgv(argv);
  pid_t pid = -1;
  const int spawned = posix_spawn(&pid, argv[0].c_str(), &actions, nullptr,
                                  args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  close(err_pipe[1]);
  UniqueFd out(out_pipe[0]), err(err_pipe[0]);
  if (spawned != 0) return absl::ErrnoToStatus(spawned, "running " + argv[0]);

  CompilerRun run;
  pollfd fds[2] = {{out.get(), POLLIN, 0}, {err.get(), POLLIN, 0}};
  const int targets[2] = {STDOUT_FILENO, STDERR_FILENO};
  int open_streams = 2;
  char buffer[1 << 16];
  while (open_streams > 0) {
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = read(fds[i].fd, buffer, sizeof(buffer));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fds[i].fd = -1;
        --open_streams;
        continue;
      }
      const absl::string_view chunk(buffer, n);
      AppendTail(run.output, chunk);
      // The caller's stream may be closed; the compile goes on regardless.
      if (pass_through) (void)WriteAll(targets[i], chunk, "output");
    }
  }
  while (waitpid(pid, &run.wait_status, 0) < 0) {
    if (errno != EINTR)
      return absl::ErrnoToStatus(errno, "waiting for " + argv[0]);
  }
  if (run.output.size() > kMaxCapturedBytes) {
    run.output.erase(0, run.output.size() - kMaxCapturedBytes);
  }
  return run;
}

absl::Status ExecCompiler(const std::vector<std::string>& argv) {
  std::vector<char*> args = CArgv(argv);
  execv(argv[0].c_str(), args.data());
  return absl::ErrnoToStatus(errno, "running " + argv[0]);
}

}  // namespace neffd::neffcc
