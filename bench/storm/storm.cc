// storm: the SPMD compile storm (docs/BENCHMARKS.md). R rank processes ask
// for K graphs in the same order, with a barrier after each graph (ranks of
// one job run collectives, so none starts graph i+1 before all hold graph
// i); fake compiles take C ms and write S bytes. Modes:
//   daemon    the client library with a real neffd
//   fallback  the client library without a daemon (flock + atomic publish)
//   legacy    every rank runs libneuronxla's protocol on the shared dir
// Fails (exit 1) on any correctness problem: compiles != K, a rank error, a
// byte mismatch. Prints one markdown row per mode.
//
//   bazel run -c opt //bench/storm:storm -- --ranks=128 --graphs=64
//       --compile_ms=200 --neff_bytes=8388608 --modes=daemon,legacy,fallback
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "tests/harness/process.h"

ABSL_FLAG(int, ranks, 128, "rank processes");
ABSL_FLAG(int, graphs, 64, "graphs");
ABSL_FLAG(int, compile_ms, 200, "fake compile time");
ABSL_FLAG(int64_t, neff_bytes, 8 << 20, "NEFF size");
ABSL_FLAG(std::string, modes, "daemon,legacy", "daemon, legacy, fallback");
ABSL_FLAG(int, poll_ms, 1000, "legacy ranks' poll interval");
ABSL_FLAG(bool, random_order, false, "each rank its own order");
ABSL_FLAG(std::string, workdir, "/tmp/neffd-storm", "scratch directory");

extern char** environ;

namespace neffd::bench {
namespace {

struct Rank {
  pid_t pid = -1;
  FILE* to = nullptr;    // its stdin
  FILE* from = nullptr;  // its stdout
};

Rank Spawn(const std::vector<std::string>& argv,
           const std::vector<std::string>& env) {
  int in[2], out[2];
  if (pipe(in) != 0 || pipe(out) != 0) abort();
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  std::vector<std::string> strings(argv);
  std::vector<char*> args;
  for (std::string& a : strings) args.push_back(a.data());
  args.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) env_strings.emplace_back(*e);
  env_strings.insert(env_strings.end(), env.begin(), env.end());
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  Rank r;
  if (posix_spawn(&r.pid, args[0], &fa, nullptr, args.data(), envp.data()) !=
      0) {
    abort();
  }
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  r.to = fdopen(in[1], "w");
  r.from = fdopen(out[0], "r");
  return r;
}

std::string ReadLine(FILE* f) {
  char buf[512];
  if (fgets(buf, sizeof(buf), f) == nullptr) return "";
  return buf;
}

double Percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(q * (v.size() - 1))];
}

uint64_t StatField(const std::string& json, const std::string& name) {
  const std::string field = "\"" + name + "\":\"";
  size_t at = json.find(field);
  return at == std::string::npos ? 0
                                 : std::stoull(json.substr(at + field.size()));
}

double CpuSeconds(pid_t pid) {
  std::string stat = testing::ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> f =
      absl::StrSplit(stat.substr(close + 2), ' ', absl::SkipEmpty());
  if (f.size() < 13) return 0;
  return (std::stod(f[11]) + std::stod(f[12])) / sysconf(_SC_CLK_TCK);
}

// Runs one mode; returns false on a correctness failure.
bool RunMode(const std::string& mode) {
  const int ranks = absl::GetFlag(FLAGS_ranks);
  const int graphs = absl::GetFlag(FLAGS_graphs);
  const std::string root = absl::GetFlag(FLAGS_workdir) + "/" + mode;
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root + "/neff");
  setenv("TEST_TMPDIR", root.c_str(), 1);
  std::unique_ptr<testing::DaemonProcess> daemon;
  if (mode == "daemon") {
    daemon = std::make_unique<testing::DaemonProcess>(
        root, std::vector<std::string>{"--poll_interval=0.1"});
    if (!daemon->Start()) {
      std::fprintf(stderr, "neffd did not start\n");
      return false;
    }
  }
  const std::string log = root + "/compiles.txt";
  std::vector<Rank> procs;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> env = {
        "TORCH_NEURONX_NEFF_CACHE_DIR=" + root + "/neff",
        "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR=" + root + "/local",
        "TORCH_NEURONX_DEBUG_DIR=" + root + "/debug", absl::StrCat("RANK=", r)};
    env.push_back("NEFFD_ADDRESS=" +
                  (daemon ? daemon->address() : "unix:" + root + "/none"));
    procs.push_back(Spawn(
        {testing::Runfile("bench/storm/storm_rank"), "--mode=" + mode,
         absl::StrCat("--graphs=", graphs),
         absl::StrCat("--compile_ms=", absl::GetFlag(FLAGS_compile_ms)),
         absl::StrCat("--neff_bytes=", absl::GetFlag(FLAGS_neff_bytes)),
         absl::StrCat("--poll_ms=", absl::GetFlag(FLAGS_poll_ms)),
         absl::StrCat("--seed=", absl::GetFlag(FLAGS_random_order) ? 0 : -1),
         "--compile_log=" + log},
        env));
  }
  bool ok = true;
  std::vector<double> handoff_ms;
  const absl::Time start = absl::Now();
  for (int step = 0; step < graphs && ok; ++step) {
    for (Rank& p : procs) {
      std::fputs("go\n", p.to);
      std::fflush(p.to);
    }
    std::map<int, std::vector<std::pair<int64_t, bool>>> by_graph;
    for (Rank& p : procs) {
      std::vector<std::string> f = absl::StrSplit(ReadLine(p.from), ' ');
      int g = 0;
      int64_t us = 0;
      if (f.size() < 4 || f[0] != "got" || !absl::SimpleAtoi(f[1], &g) ||
          !absl::SimpleAtoi(f[2], &us)) {
        std::fprintf(stderr, "%s rank failed: %s\n", mode.c_str(),
                     absl::StrJoin(f, " ").c_str());
        ok = false;
        break;
      }
      by_graph[g].push_back({us, absl::StartsWith(f[3], "1")});
    }
    for (auto& [g, got] : by_graph) {
      int64_t published = 0;
      for (auto& [us, compiled] : got) {
        if (compiled) published = us;
      }
      if (published == 0) continue;
      for (auto& [us, compiled] : got) {
        if (!compiled)
          handoff_ms.push_back(std::max<int64_t>(0, us - published) / 1e3);
      }
    }
  }
  const absl::Duration wall = absl::Now() - start;
  uint64_t ops = 0, bytes = 0;
  for (Rank& p : procs) {
    std::fclose(p.to);
    std::vector<std::string> f = absl::StrSplit(ReadLine(p.from), ' ');
    if (f.size() == 3 && f[0] == "stats") {
      ops += std::stoull(f[1]);
      bytes += std::stoull(f[2]);
    }
    std::fclose(p.from);
    int status = 0;
    waitpid(p.pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) ok = false;
  }
  const std::string compile_log = testing::ReadFile(log);
  const size_t compiles =
      std::count(compile_log.begin(), compile_log.end(), '\n');
  std::string shared_ops = mode == "fallback" ? "n/a" : absl::StrCat(ops);
  std::string shared_bytes = absl::StrCat(bytes);
  std::string daemon_cpu = "-";
  if (daemon) {
    testing::CommandResult stats = testing::RunCommand(
        {testing::Runfile("client/neffctl"), "--address=" + daemon->address(),
         "--json", "stats"});
    shared_ops = absl::StrCat(StatField(stats.out, "store_metadata_ops"));
    shared_bytes =
        absl::StrCat(StatField(stats.out, "local_tier_filled_bytes"));
    daemon_cpu = absl::StrFormat("%.2f", CpuSeconds(daemon->process().pid()));
    daemon->Signal(SIGTERM);
    daemon->Wait();
  }
  if (compiles != static_cast<size_t>(graphs)) {
    std::fprintf(stderr, "%s: %zu compiles for %d graphs\n", mode.c_str(),
                 compiles, graphs);
    ok = false;
  }
  std::printf("| %s | %d x %d | %.2f | %zu | %.2f | %.2f | %s | %s | %s |\n",
              mode.c_str(), ranks, graphs, absl::ToDoubleSeconds(wall),
              compiles, Percentile(handoff_ms, 0.5),
              Percentile(handoff_ms, 0.99), shared_ops.c_str(),
              shared_bytes.c_str(), daemon_cpu.c_str());
  std::fflush(stdout);
  return ok;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  if (getenv("TEST_SRCDIR") == nullptr) {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe");
    setenv("TEST_SRCDIR", (self + ".runfiles").c_str(), 1);
  }
  std::printf(
      "| mode | ranks x graphs | wall (s) | compiles | handoff p50 (ms) | "
      "handoff p99 (ms) | shared metadata ops | shared bytes read | daemon "
      "CPU (s) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  bool ok = true;
  for (absl::string_view mode :
       absl::StrSplit(absl::GetFlag(FLAGS_modes), ',')) {
    ok = RunMode(std::string(mode)) && ok;
  }
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace neffd::bench

int main(int argc, char** argv) { return neffd::bench::Main(argc, argv); }
