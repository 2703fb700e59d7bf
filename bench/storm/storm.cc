// storm: the SPMD compile storm (docs/BENCHMARKS.md). R rank processes ask
// for K graphs, with a barrier after each step (ranks of one job run
// collectives, so none starts step i+1 before all hold step i's graph); fake
// compiles take C ms and write S bytes. Modes (--modes, comma-separated):
//   daemon        the client library with a real neffd
//   fallback      the client library without a daemon (flock + atomic publish)
//   legacy[:MS]   every rank runs libneuronxla's protocol on the shared dir,
//                 polling every MS (default --poll_ms)
//   floor         the yardstick no protocol can beat here: rank 0 compiles
//                 while the others block on its flock, so the kernel wakes
//                 them as the NEFF lands (bench/storm/floor_protocol.h);
//                 same order, not warm
// --order=same: every rank asks for the graphs in the same order (SPMD);
// random: each rank its own permutation (still a barrier per step).
// --warm: the store is populated first (one rank, instant compiles, not
// timed; the daemon is then restarted on an empty local dir, i.e. a fresh
// host), then R ranks look up and read the K entries: nothing may compile.
// Fails (exit 1) on any correctness problem: compiles != K (0 when warm), a
// rank error, a byte mismatch. Prints one markdown row per mode.
//
//   bazel run -c opt //bench/storm:storm -- --modes=daemon,legacy:100
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
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
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bench/storm/expected.h"
#include "tests/harness/process.h"

ABSL_FLAG(int, ranks, 128, "rank processes");
ABSL_FLAG(int, graphs, 64, "graphs");
ABSL_FLAG(int, compile_ms, 200, "fake compile time");
ABSL_FLAG(int64_t, neff_bytes, 8 << 20, "NEFF size");
ABSL_FLAG(std::string, modes, "daemon,legacy:100,legacy:1000",
          "daemon, fallback, legacy[:poll ms], floor");
ABSL_FLAG(int, poll_ms, 1000, "legacy ranks' poll interval (legacy w/o :MS)");
ABSL_FLAG(std::string, order, "same", "same (SPMD) or random per rank");
ABSL_FLAG(bool, warm, false, "populate first; ranks only look up and read");
ABSL_FLAG(std::string, workdir, "/tmp/neffd-storm", "scratch directory");
ABSL_FLAG(std::string, daemon_flags, "--poll_interval=0.1",
          "extra neffd flags, space-separated");

extern char** environ;

namespace neffd::bench {
namespace {

struct Mode {
  std::string kind;  // daemon, fallback, legacy, floor
  int poll_ms = 0;
  std::string label;
};

Mode ParseMode(absl::string_view spec) {
  Mode m;
  std::vector<std::string> parts = absl::StrSplit(spec, ':');
  m.kind = parts[0];
  m.label = m.kind;
  if (m.kind == "legacy") {
    m.poll_ms = absl::GetFlag(FLAGS_poll_ms);
    if (parts.size() > 1) (void)absl::SimpleAtoi(parts[1], &m.poll_ms);
    m.label = absl::StrFormat("legacy@%gs", m.poll_ms / 1000.0);
  }
  return m;
}

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
  std::string stat =
      test_support::ReadFile(absl::StrCat("/proc/", pid, "/stat"));
  size_t close = stat.rfind(')');
  if (close == std::string::npos) return 0;
  std::vector<std::string> f =
      absl::StrSplit(stat.substr(close + 2), ' ', absl::SkipEmpty());
  if (f.size() < 13) return 0;
  return (std::stod(f[11]) + std::stod(f[12])) / sysconf(_SC_CLK_TCK);
}

// Bytes the process has passed through read(2) so far, from any file or
// socket (/proc/<pid>/io rchar).
uint64_t ReadChars(pid_t pid) {
  std::string io = test_support::ReadFile(absl::StrCat("/proc/", pid, "/io"));
  size_t at = io.find("rchar: ");
  return at == std::string::npos ? 0 : std::stoull(io.substr(at + 7));
}

// What the ranks of one phase measured.
struct Phase {
  bool ok = true;
  double wall_s = 0;
  size_t compiles = 0;
  std::vector<double> handoff_ms;  // compile end -> waiter holds the path
  std::vector<double> publish_ms;  // compile end -> publisher holds the path
  // The lock handoff proper, from the moment the entry was released to the
  // host's waiters (legacy: model.done written; daemon: its waiters
  // answered, from its log) to each waiter holding the path.
  std::map<int, int64_t> released_us;                  // graph -> when
  std::vector<std::pair<int, int64_t>> waiter_got_us;  // (graph, when)
  std::vector<double> LockHandoffMs() const;
  uint64_t ops = 0, bytes = 0;  // the ranks' own shared-dir counts
  double rank_cpu_s = 0;
};

std::vector<double> Phase::LockHandoffMs() const {
  std::vector<double> out;
  for (const auto& [g, got] : waiter_got_us) {
    auto released = released_us.find(g);
    if (released == released_us.end()) continue;
    out.push_back(std::max<int64_t>(0, got - released->second) / 1e3);
  }
  return out;
}

// Runs `ranks` rank processes over `graphs` steps against `root`. The clock
// starts once every rank is ready (started and, with the client library,
// connected), right after `on_ready` has run.
Phase RunRanks(const Mode& mode, const std::string& root,
               const std::string& address, int ranks, int graphs,
               int compile_ms, const std::function<void()>& on_ready) {
  Phase phase;
  const std::string log = root + "/compiles.txt";
  unlink(log.c_str());
  const bool random = absl::GetFlag(FLAGS_order) == "random";
  std::vector<Rank> procs;
  for (int r = 0; r < ranks; ++r) {
    std::vector<std::string> env = {
        "TORCH_NEURONX_NEFF_CACHE_DIR=" + root + "/neff",
        "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR=" + root + "/local",
        "TORCH_NEURONX_DEBUG_DIR=" + root + "/debug", absl::StrCat("RANK=", r),
        "NEFFD_ADDRESS=" + address};
    procs.push_back(
        Spawn({test_support::Runfile("bench/storm/storm_rank"),
               "--mode=" + mode.kind, absl::StrCat("--graphs=", graphs),
               absl::StrCat("--compile_ms=", compile_ms),
               absl::StrCat("--neff_bytes=", absl::GetFlag(FLAGS_neff_bytes)),
               absl::StrCat("--poll_ms=", mode.poll_ms),
               absl::StrCat("--seed=", random ? 0 : -1),
               "--expected_dir=" + absl::GetFlag(FLAGS_workdir) + "/expected",
               "--compile_log=" + log},
              env));
  }
  for (Rank& p : procs) {
    const std::string line = ReadLine(p.from);
    if (absl::StripAsciiWhitespace(line) != "ready") {
      std::fprintf(stderr, "%s rank failed to start: %s\n", mode.label.c_str(),
                   line.c_str());
      phase.ok = false;
    }
  }
  if (phase.ok) on_ready();
  const absl::Time start = absl::Now();
  for (int step = 0; step < graphs && phase.ok; ++step) {
    for (Rank& p : procs) {
      std::fputs("go\n", p.to);
      std::fflush(p.to);
      // The floor's other ranks start only once rank 0 holds the lock.
      if (mode.kind == "floor" && &p == &procs.front() &&
          absl::StripAsciiWhitespace(ReadLine(p.from)) != "locked") {
        std::fprintf(stderr, "floor: rank 0 did not take the lock\n");
        phase.ok = false;
        break;
      }
    }
    // graph -> (holds-path time, compile end time or 0 if it did not compile)
    std::map<int, std::vector<std::pair<int64_t, int64_t>>> by_graph;
    for (Rank& p : procs) {
      std::vector<std::string> f =
          absl::StrSplit(absl::StripAsciiWhitespace(ReadLine(p.from)), ' ');
      int g = 0;
      int64_t us = 0, compiled_us = 0, released_us = 0;
      if (f.size() != 5 || f[0] != "got" || !absl::SimpleAtoi(f[1], &g) ||
          !absl::SimpleAtoi(f[2], &us) ||
          !absl::SimpleAtoi(f[3], &compiled_us) ||
          !absl::SimpleAtoi(f[4], &released_us)) {
        std::fprintf(stderr, "%s rank failed: %s\n", mode.label.c_str(),
                     absl::StrJoin(f, " ").c_str());
        phase.ok = false;
        break;
      }
      by_graph[g].push_back({us, compiled_us});
      if (released_us != 0) phase.released_us[g] = released_us;
    }
    for (auto& [g, got] : by_graph) {
      int64_t compiled_end = 0;
      for (auto& [us, end] : got) {
        if (end != 0) {
          compiled_end = end;
          phase.publish_ms.push_back((us - end) / 1e3);
        }
      }
      if (compiled_end == 0) continue;
      for (auto& [us, end] : got) {
        if (end == 0) {
          phase.handoff_ms.push_back(std::max<int64_t>(0, us - compiled_end) /
                                     1e3);
          phase.waiter_got_us.push_back({g, us});
        }
      }
    }
  }
  phase.wall_s = absl::ToDoubleSeconds(absl::Now() - start);
  for (Rank& p : procs) {
    std::fclose(p.to);
    std::vector<std::string> f = absl::StrSplit(ReadLine(p.from), ' ');
    if (f.size() == 3 && f[0] == "stats") {
      phase.ops += std::stoull(f[1]);
      phase.bytes += std::stoull(f[2]);
    }
    std::fclose(p.from);
    int status = 0;
    struct rusage ru {};
    wait4(p.pid, &status, 0, &ru);
    phase.rank_cpu_s += ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
                        (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) phase.ok = false;
  }
  const std::string compile_log = test_support::ReadFile(log);
  phase.compiles = std::count(compile_log.begin(), compile_log.end(), '\n');
  return phase;
}

std::unique_ptr<test_support::DaemonProcess> StartDaemon(
    const std::string& root) {
  std::vector<std::string> flags = absl::StrSplit(
      absl::GetFlag(FLAGS_daemon_flags), ' ', absl::SkipWhitespace());
  // Info level: the daemon logs when it answered each key's waiters.
  auto daemon = std::make_unique<test_support::DaemonProcess>(
      root, flags, std::vector<std::string>{"TORCH_NEURONX_LOG_LEVEL=2"});
  if (!daemon->Start()) {
    std::fprintf(stderr, "neffd did not start\n");
    return nullptr;
  }
  return daemon;
}

// The daemon's counters and its process's resource use, at one moment.
struct DaemonFigures {
  uint64_t store_metadata_ops = 0;
  uint64_t tier_filled_bytes = 0;  // bytes read from the shared store
  double cpu_s = 0;
  uint64_t read_chars = 0;
};

DaemonFigures ReadDaemonFigures(test_support::DaemonProcess& daemon) {
  test_support::CommandResult stats = test_support::RunCommand(
      {test_support::Runfile("client/neffctl"), "--address=" + daemon.address(),
       "--json", "stats"});
  DaemonFigures figures;
  figures.store_metadata_ops = StatField(stats.out, "store_metadata_ops");
  figures.tier_filled_bytes = StatField(stats.out, "local_tier_filled_bytes");
  figures.cpu_s = CpuSeconds(daemon.process().pid());
  figures.read_chars = ReadChars(daemon.process().pid());
  return figures;
}

// The value of `name=` in a log line ("" if absent).
absl::string_view LogValue(absl::string_view line, absl::string_view name) {
  const std::string field = absl::StrCat(" ", name, "=");
  size_t at = line.find(field);
  if (at == absl::string_view::npos) return "";
  absl::string_view v = line.substr(at + field.size());
  return v.substr(0, v.find(' '));
}

// The daemon's own side of the handoff, from its log: for each publish,
// milliseconds from the Publish call to answering every parked waiter; and
// when each graph's waiters were answered (into `phase`).
std::vector<double> DaemonAnswerMs(const std::string& log, Phase& phase) {
  std::vector<double> out;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    if (!absl::StrContains(line, "event=waiters_answered")) continue;
    int64_t us = 0;
    if (absl::SimpleAtoi(LogValue(line, "since_publish_us"), &us)) {
      out.push_back(us / 1e3);
    }
    absl::string_view entry = LogValue(line, "entry");
    int g = 0;
    if (absl::ConsumePrefix(&entry, "neff/bench/storm") &&
        absl::SimpleAtoi(entry, &g) &&
        absl::SimpleAtoi(LogValue(line, "released_unix_us"), &us)) {
      phase.released_us[g] = us;
    }
  }
  return out;
}

// Runs one mode; returns false on a correctness failure.
bool RunMode(const Mode& mode) {
  const int ranks = absl::GetFlag(FLAGS_ranks);
  const int graphs = absl::GetFlag(FLAGS_graphs);
  const bool warm = absl::GetFlag(FLAGS_warm);
  const std::string root = absl::GetFlag(FLAGS_workdir) + "/" + mode.kind;
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root + "/neff");
  setenv("TEST_TMPDIR", root.c_str(), 1);
  const bool with_daemon = mode.kind == "daemon";
  std::unique_ptr<test_support::DaemonProcess> daemon;
  if (with_daemon && !(daemon = StartDaemon(root))) return false;
  auto address = [&] {
    return daemon ? daemon->address() : "unix:" + root + "/none";
  };
  if (warm) {
    Phase fill = RunRanks(mode, root, address(), 1, graphs, 0, [] {});
    if (!fill.ok || fill.compiles != static_cast<size_t>(graphs)) {
      std::fprintf(stderr, "%s: populating the store failed\n",
                   mode.label.c_str());
      return false;
    }
    // A fresh host: nothing local (no tier, index, locks), only the store.
    if (daemon) {
      daemon->Signal(SIGTERM);
      daemon->Wait();
      daemon.reset();
    }
    std::filesystem::remove_all(root + "/local");
    std::filesystem::remove_all(root + "/debug");
    if (with_daemon && !(daemon = StartDaemon(root))) return false;
  }
  // The daemon's figures count from the moment the ranks are ready (their
  // connecting Lookup and the daemon's start-up are not part of the storm).
  DaemonFigures before;
  Phase phase = RunRanks(mode, root, address(), ranks, graphs,
                         absl::GetFlag(FLAGS_compile_ms), [&] {
                           if (daemon) before = ReadDaemonFigures(*daemon);
                         });
  // Only legacy ranks count their own metadata operations.
  std::string shared_ops =
      mode.kind == "legacy" ? absl::StrCat(phase.ops) : "n/a";
  std::string shared_bytes = absl::StrCat(phase.bytes);
  std::string daemon_cpu = "-", answer = "-", daemon_read = "-";
  if (daemon) {
    const DaemonFigures after = ReadDaemonFigures(*daemon);
    shared_ops =
        absl::StrCat(after.store_metadata_ops - before.store_metadata_ops);
    shared_bytes =
        absl::StrCat(after.tier_filled_bytes - before.tier_filled_bytes);
    daemon_cpu = absl::StrFormat("%.2f", after.cpu_s - before.cpu_s);
    daemon_read = absl::StrCat(after.read_chars - before.read_chars);
    daemon->Signal(SIGTERM);
    daemon->Wait();
    std::vector<double> answer_ms =
        DaemonAnswerMs(daemon->process().Stderr(), phase);
    if (!answer_ms.empty()) {
      answer = absl::StrFormat("%.1f", Percentile(answer_ms, 0.99));
    }
  }
  const std::vector<double> lock_handoff_ms = phase.LockHandoffMs();
  // Fallback mode has no release moment it can report ("-").
  auto lock_handoff = [&](double q) {
    return lock_handoff_ms.empty()
               ? std::string("-")
               : absl::StrFormat("%.1f", Percentile(lock_handoff_ms, q));
  };
  const size_t want = warm ? 0 : graphs;
  if (phase.compiles != want) {
    std::fprintf(stderr, "%s: %zu compiles, expected %zu\n", mode.label.c_str(),
                 phase.compiles, want);
    phase.ok = false;
  }
  std::printf(
      "| %s | %d x %d | %.2f | %zu | %.1f | %.1f | %s | %s | %s | %.1f | "
      "%s | %s | %s | %s | %.1f |\n",
      mode.label.c_str(), ranks, graphs, phase.wall_s, phase.compiles,
      Percentile(phase.handoff_ms, 0.5), Percentile(phase.handoff_ms, 0.99),
      lock_handoff(0.5).c_str(), lock_handoff(0.99).c_str(), answer.c_str(),
      Percentile(phase.publish_ms, 0.5), shared_ops.c_str(),
      shared_bytes.c_str(), daemon_read.c_str(), daemon_cpu.c_str(),
      phase.rank_cpu_s);
  std::fflush(stdout);
  return phase.ok;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  signal(SIGPIPE, SIG_IGN);
  if (getenv("TEST_SRCDIR") == nullptr) {
    const std::string self = std::filesystem::read_symlink("/proc/self/exe");
    setenv("TEST_SRCDIR", (self + ".runfiles").c_str(), 1);
  }
  const std::string order = absl::GetFlag(FLAGS_order);
  if (order != "same" && order != "random") {
    std::fprintf(stderr, "--order must be same or random\n");
    return 2;
  }
  std::vector<Mode> modes;
  for (absl::string_view spec :
       absl::StrSplit(absl::GetFlag(FLAGS_modes), ',')) {
    modes.push_back(ParseMode(spec));
    const std::string& kind = modes.back().kind;
    if (kind != "daemon" && kind != "fallback" && kind != "legacy" &&
        kind != "floor") {
      std::fprintf(stderr, "--modes: unknown mode '%s'\n", kind.c_str());
      return 2;
    }
    if (kind == "floor" && (order != "same" || absl::GetFlag(FLAGS_warm))) {
      std::fprintf(stderr, "--modes: floor needs --order=same, not --warm\n");
      return 2;
    }
  }
  // The ranks compare what they read with these, byte for byte; making them
  // here keeps that cost out of the timed steps.
  if (absl::Status s = WriteExpected(absl::GetFlag(FLAGS_workdir) + "/expected",
                                     absl::GetFlag(FLAGS_graphs),
                                     absl::GetFlag(FLAGS_neff_bytes));
      !s.ok()) {
    std::fprintf(stderr, "%s\n", s.ToString().c_str());
    return 1;
  }
  std::printf(
      "| mode | ranks x graphs | wall (s) | compiles | handoff p50 (ms) | "
      "handoff p99 (ms) | lock handoff p50 (ms) | lock handoff p99 (ms) | "
      "daemon answer p99 (ms) | publish p50 (ms) | shared metadata ops | "
      "shared bytes read | daemon read() bytes | daemon CPU (s) | rank CPU (s) "
      "|\n"
      "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
      "---:|\n");
  bool ok = true;
  for (const Mode& mode : modes) ok = RunMode(mode) && ok;
  return ok ? 0 : 1;
}

}  // namespace
}  // namespace neffd::bench

int main(int argc, char** argv) { return neffd::bench::Main(argc, argv); }
