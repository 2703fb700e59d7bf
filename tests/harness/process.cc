#include "tests/harness/process.h"

#include <dirent.h>
#include <fcntl.h>
#include <link.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "store/digest.h"
#include "store/unique_fd.h"

extern char** environ;

namespace neffd::test_support {
namespace {

std::string TmpRoot() {
  const char* t = getenv("TEST_TMPDIR");
  return t != nullptr ? t : "/tmp";
}

int AddSanitizerRuntime(struct dl_phdr_info* info, size_t, void* out) {
  absl::string_view path(info->dlpi_name);
  absl::string_view name = path.substr(path.rfind('/') + 1);
  if (absl::StartsWith(name, "libasan.so") ||
      absl::StartsWith(name, "libubsan.so") ||
      absl::StartsWith(name, "libtsan.so")) {
    static_cast<std::vector<std::string>*>(out)->emplace_back(path);
  }
  return 0;
}

}  // namespace

std::vector<std::string> SanitizerPreloadEnv() {
  std::vector<std::string> runtimes;
  dl_iterate_phdr(AddSanitizerRuntime, &runtimes);
  if (runtimes.empty()) return {};
  const char* asan = getenv("ASAN_OPTIONS");
  // Later options win: the interpreter's own allocations live until exit.
  return {absl::StrCat("LD_PRELOAD=", absl::StrJoin(runtimes, ":")),
          absl::StrCat("ASAN_OPTIONS=", asan != nullptr ? asan : "",
                       asan != nullptr ? ":" : "", "detect_leaks=0")};
}

std::vector<std::string> NeffclientPythonEnv(bool portable) {
  auto dir = [](const std::string& runfile) {
    const std::string path = Runfile(runfile);
    return path.substr(0, path.rfind('/'));
  };
  std::vector<std::string> env;
  if (portable) {
    env.push_back("PYTHONPATH=" + dir("client/python/portable/neffclient.py"));
    env.push_back("NEFFCLIENT_LIBRARY=" +
                  Runfile("client/shared/libneffclient.so"));
  } else {
    env.push_back(
        "PYTHONPATH=" +
        dir("client/python/neffclient.cpython-311-x86_64-linux-gnu.so"));
  }
  for (std::string& e : SanitizerPreloadEnv()) env.push_back(std::move(e));
  return env;
}

bool WaitUntil(const std::function<bool()>& condition, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (condition()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
}

std::string Runfile(const std::string& path) {
  const char* srcdir = getenv("TEST_SRCDIR");
  const char* workspace = getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/",
                      workspace ? workspace : "neffd", "/", path);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << content;
}

Process::Process(std::vector<std::string> argv, std::vector<std::string> env) {
  static std::atomic<int> counter{0};
  const std::string base =
      absl::StrCat(TmpRoot(), "/proc.", getpid(), ".", counter++);
  out_path_ = base + ".out";
  err_path_ = base + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path_.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  // `env` overrides the test's own value of a variable (getenv returns the
  // first entry of a name, so a second one would be ignored).
  absl::flat_hash_set<std::string> overridden;
  for (const std::string& e : env) overridden.insert(e.substr(0, e.find('=')));
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    absl::string_view entry(*e);
    if (!overridden.contains(entry.substr(0, entry.find('=')))) {
      env_strings.emplace_back(entry);
    }
  }
  for (std::string& e : env) env_strings.push_back(e);
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  int rc =
      posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    fprintf(stderr, "cannot spawn %s: %s\n", args[0], strerror(rc));
    abort();
  }
}

Process::~Process() {
  if (Running()) {
    Signal(SIGKILL);
    Wait();
  }
}

void Process::Signal(int sig) {
  if (status_ == -1) kill(pid_, sig);
}

int Process::Wait() {
  if (status_ == -1) {
    int raw = 0;
    while (waitpid(pid_, &raw, 0) < 0 && errno == EINTR) {
    }
    status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  }
  return status_;
}

bool Process::Running() {
  if (status_ != -1) return false;
  int raw = 0;
  if (waitpid(pid_, &raw, WNOHANG) == pid_) {
    status_ = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
    return false;
  }
  return true;
}

bool PollUntil(const std::function<bool()>& observed, absl::Duration limit) {
  const absl::Time deadline = absl::Now() + limit;
  for (;;) {
    if (observed()) return true;
    if (absl::Now() >= deadline) return false;
    absl::SleepFor(absl::Milliseconds(5));
  }
}

CommandResult RunCommand(std::vector<std::string> argv,
                         std::vector<std::string> env) {
  Process p(std::move(argv), std::move(env));
  int code = p.Wait();
  return CommandResult{code, p.Stdout(), p.Stderr()};
}

// Unix socket paths are limited to 107 bytes and TEST_TMPDIR is long, so the
// socket lives in a short directory of its own.
std::string ShortSocketPath() {
  char dir[] = "/tmp/neffd-test.XXXXXX";
  if (mkdtemp(dir) == nullptr) abort();
  return absl::StrCat(dir, "/neffd.sock");
}

DaemonProcess::DaemonProcess(std::string root, std::vector<std::string> flags,
                             std::vector<std::string> env)
    : root_(std::move(root)),
      socket_path_(ShortSocketPath()),
      address_(absl::StrCat("unix:", socket_path_)),
      admin_address_(
          absl::StrCat("unix:", socket_path_.substr(0, socket_path_.rfind('/')),
                       "/admin.sock")),
      flags_(std::move(flags)),
      env_(std::move(env)) {}

DaemonProcess::DaemonProcess(const DaemonProcess& other)
    : root_(other.root_),
      socket_path_(other.socket_path_),
      address_(other.address_),
      admin_address_(other.admin_address_),
      flags_(other.flags_),
      env_(other.env_),
      binary_(other.binary_) {}

DaemonProcess::~DaemonProcess() {
  process_.reset();
  unlink(socket_path_.c_str());
  unlink(admin_address_.substr(5).c_str());
  rmdir(socket_path_.substr(0, socket_path_.rfind('/')).c_str());
}

std::vector<std::string> DaemonProcess::Argv() const {
  std::vector<std::string> argv = {
      Runfile(binary_),
      "--cache_dir=" + root_ + "/neff",
      "--hlo_cache_dir=" + root_ + "/hlo",
      "--local_dir=" + root_ + "/local",
      "--address=" + address_,
      "--admin_address=" + admin_address_,
  };
  argv.insert(argv.end(), flags_.begin(), flags_.end());
  return argv;
}

std::vector<std::string> DaemonProcess::NeffctlArgv() const {
  return {Runfile("client/neffctl"), "--address=" + address_,
          "--admin_address=" + admin_address_};
}

namespace {

bool AcceptsConnections(const std::string& socket_path) {
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  socket_path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  return fd.valid() && connect(fd.get(), reinterpret_cast<sockaddr*>(&addr),
                               sizeof(addr)) == 0;
}

bool CallerOwnsNotifySocket(const std::vector<std::string>& env) {
  for (const std::string& e : env) {
    if (absl::StartsWith(e, "NOTIFY_SOCKET=")) return true;
  }
  return false;
}

}  // namespace

bool DaemonProcess::Start() {
  const std::string socket_dir =
      socket_path_.substr(0, socket_path_.rfind('/'));
  // A copy's destructor removes the directory this daemon shares with it.
  (void)mkdir(socket_dir.c_str(), 0700);
  const absl::Time spawned = absl::Now();
  if (CallerOwnsNotifySocket(env_)) {
    // The test reads READY=1 itself; serving is the readiness seen here.
    (void)unlink(socket_path_.c_str());
    process_ = std::make_unique<Process>(Argv(), env_);
    PollUntil(
        [&] {
          return !process_->Running() || AcceptsConnections(socket_path_);
        },
        absl::InfiniteDuration());
    if (!process_->Running()) return false;
    start_duration_ = absl::Now() - spawned;
    return true;
  }
  const std::string notify_path = socket_dir + "/notify.sock";
  unlink(notify_path.c_str());
  UniqueFd notify(socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  notify_path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  if (!notify.valid() || bind(notify.get(), reinterpret_cast<sockaddr*>(&addr),
                              sizeof(addr)) != 0) {
    std::fprintf(stderr, "DaemonProcess: cannot bind %s: %s\n",
                 notify_path.c_str(), strerror(errno));
    return false;
  }
  std::vector<std::string> env = env_;
  env.push_back("NOTIFY_SOCKET=" + notify_path);
  process_ = std::make_unique<Process>(Argv(), env);
  bool ready = false;
  while (!ready) {
    pollfd readable{notify.get(), POLLIN, 0};
    if (poll(&readable, 1, 100) > 0) {
      char message[512];
      const ssize_t n = recv(notify.get(), message, sizeof(message), 0);
      ready =
          n > 0 && absl::StrContains(absl::string_view(message, n), "READY=1");
    } else if (!process_->Running()) {
      break;
    }
  }
  unlink(notify_path.c_str());
  start_duration_ = absl::Now() - spawned;
  return ready;
}

absl::StatusOr<v1::LockResponse> CallLock(v1::CompileCache::Stub& stub,
                                          const v1::EntryId& id,
                                          const LockCall& call) {
  v1::LockRequest request;
  *request.mutable_id() = id;
  request.set_wait(call.wait);
  request.set_wait_seconds(call.wait_seconds);
  request.set_look_up(call.look_up);
  request.set_wake_file(call.wake_file);
  v1::LockResponse response;
  grpc::ClientContext context;
  grpc::Status status = stub.Lock(&context, request, &response);
  if (!status.ok()) return absl::UnavailableError(status.error_message());
  return response;
}

absl::Status PublishInline(v1::CompileCache::Stub& stub, const v1::EntryId& id,
                           const std::string& bytes,
                           const std::map<std::string, std::string>& metadata) {
  absl::StatusOr<v1::LockResponse> granted = CallLock(stub, id);
  if (!granted.ok()) return granted.status();
  if (granted->outcome() != v1::LockResponse::GRANTED) {
    return absl::AlreadyExistsError(
        v1::LockResponse::Outcome_Name(granted->outcome()));
  }
  return PublishHeld(stub, granted->lease().lease_id(), id, bytes, metadata);
}

absl::Status PublishHeld(v1::CompileCache::Stub& stub,
                         const std::string& lease_id, const v1::EntryId& id,
                         const std::string& bytes,
                         const std::map<std::string, std::string>& metadata) {
  v1::PublishRequest publish;
  publish.set_lease_id(lease_id);
  *publish.mutable_id() = id;
  publish.set_inline_bytes(bytes);
  publish.set_size(bytes.size());
  publish.set_sha256(Sha256Hex(bytes));
  publish.mutable_metadata()->insert(metadata.begin(), metadata.end());
  v1::PublishResponse published;
  grpc::ClientContext context;
  grpc::Status status = stub.Publish(&context, publish, &published);
  if (!status.ok()) return absl::InternalError(status.error_message());
  return absl::OkStatus();
}

std::unique_ptr<v1::CompileCache::Stub> DaemonProcess::NewStub() const {
  return v1::CompileCache::NewStub(
      grpc::CreateChannel(address_, grpc::InsecureChannelCredentials()));
}

CommandResult RunNeffctl(const DaemonProcess& daemon,
                         const std::vector<std::string>& args) {
  std::vector<std::string> argv = daemon.NeffctlArgv();
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv);
}

v1::LocksResponse GetLocks(const DaemonProcess& daemon) {
  auto admin = v1::CacheAdmin::NewStub(grpc::CreateChannel(
      daemon.address(), grpc::InsecureChannelCredentials()));
  v1::LocksResponse locks;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(5));
  if (!admin->GetLocks(&context, v1::GetLocksRequest(), &locks).ok()) {
    return v1::LocksResponse();
  }
  return locks;
}

v1::Stats StatsOf(const DaemonProcess& daemon) {
  v1::Stats stats;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::seconds(10));
  (void)daemon.NewStub()->GetStats(&context, v1::GetStatsRequest(), &stats);
  return stats;
}

uint64_t LockWaiters(const DaemonProcess& daemon) {
  return GetLocks(daemon).waiters();
}

bool HasOpenFile(pid_t pid, const std::string& suffix) {
  const std::string fd_dir = absl::StrCat("/proc/", pid, "/fd");
  DIR* dir = opendir(fd_dir.c_str());
  if (dir == nullptr) return false;
  bool found = false;
  while (struct dirent* e = readdir(dir)) {
    char target[4096];
    const ssize_t n = readlink(absl::StrCat(fd_dir, "/", e->d_name).c_str(),
                               target, sizeof(target));
    if (n > 0 && absl::EndsWith(absl::string_view(target, n), suffix)) {
      found = true;
      break;
    }
  }
  closedir(dir);
  return found;
}

}  // namespace neffd::test_support
