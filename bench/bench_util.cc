#include "bench/bench_util.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace neffd::bench {
namespace {

std::string Slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream out;
  out << in.rdbuf();
  return out.str();
}

// The value after "key:" on the first line of `text` that starts with it.
std::string Field(const std::string& text, absl::string_view key) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    absl::string_view l = line;
    if (absl::ConsumePrefix(&l, key)) {
      l = absl::StripAsciiWhitespace(l);
      absl::ConsumePrefix(&l, ":");
      return std::string(absl::StripAsciiWhitespace(l));
    }
  }
  return "";
}

bool Accepts(const std::string& socket_path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", socket_path.c_str());
  const bool ok =
      connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

}  // namespace

void PrepareHarness(const std::string& workdir) {
  std::filesystem::remove_all(workdir);
  std::filesystem::create_directories(workdir);
  setenv("TEST_TMPDIR", workdir.c_str(), 1);
  const std::string self = std::filesystem::read_symlink("/proc/self/exe");
  setenv("TEST_SRCDIR", (self + ".runfiles").c_str(), 1);
}

double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

double Percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  return values[static_cast<size_t>(q * (values.size() - 1))];
}

std::string MachineDescription() {
  double kib = 0;
  std::string mem = Field(Slurp("/proc/meminfo"), "MemTotal");
  (void)absl::SimpleAtod(mem.substr(0, mem.find(' ')), &kib);
  return absl::StrFormat(
      "nproc %d, %s, %.1f GiB RAM", std::thread::hardware_concurrency(),
      Field(Slurp("/proc/cpuinfo"), "model name"), kib / (1 << 20));
}

std::string LoadAverage() {
  std::string text = Slurp("/proc/loadavg");
  size_t end = 0;
  for (int spaces = 0; end < text.size(); ++end) {
    if (text[end] == ' ' && ++spaces == 3) break;
  }
  return text.substr(0, end);
}

std::string NowUtc() {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::Now(),
                          absl::UTCTimeZone());
}

double CpuSeconds(pid_t pid) {
  clockid_t clock;
  struct timespec ts;
  if (clock_getcpuclockid(pid, &clock) != 0 || clock_gettime(clock, &ts) != 0)
    return -1;
  return ts.tv_sec + ts.tv_nsec / 1e9;
}

double SelfCpuSeconds() { return CpuSeconds(getpid()); }

double RssMiB(pid_t pid) {
  std::string rss =
      Field(Slurp(absl::StrCat("/proc/", pid, "/status")), "VmRSS");
  double kib = 0;
  if (!absl::SimpleAtod(rss.substr(0, rss.find(' ')), &kib)) return -1;
  return kib / 1024;
}

bool WaitServing(const std::string& socket_path, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (!Accepts(socket_path)) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(1));
  }
  auto stub = grpc::health::v1::Health::NewStub(grpc::CreateChannel(
      "unix:" + socket_path, grpc::InsecureChannelCredentials()));
  while (absl::Now() < deadline) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
    context.set_wait_for_ready(true);
    grpc::health::v1::HealthCheckResponse response;
    if (stub->Check(&context, {}, &response).ok() &&
        response.status() == grpc::health::v1::HealthCheckResponse::SERVING) {
      return true;
    }
    absl::SleepFor(absl::Milliseconds(1));
  }
  return false;
}

void WriteOrDie(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::trunc);
  out << text;
  if (!out.good()) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::exit(1);
  }
}

}  // namespace neffd::bench
