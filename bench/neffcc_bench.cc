// bench/neffcc_bench.cc: what neffcc (the neuronx-cc drop-in) costs, in one
// run against a real neffd (bench/run_neffcc.sh):
//   hit   `neuronx-cc compile ...` through neffcc for a cached graph, against
//         `cp` of the same NEFF to a new file, for each NEFF size;
//   miss  neffcc for a new graph, against calling the compiler directly
//         (tests/fake_neuronx_cc sleeping --compile_ms).
// The two sides alternate within each repetition so both see the same load;
// the figures are medians of wall time per call (process start included).
#include <fcntl.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "tests/harness/process.h"

ABSL_FLAG(std::vector<std::string>, sizes_mib,
          std::vector<std::string>({"1", "64", "512"}),
          "NEFF sizes for the hit comparison");
ABSL_FLAG(int, runs, 11, "repetitions of each measurement");
ABSL_FLAG(int, compile_ms, 200, "how long the fake compiler takes");
ABSL_FLAG(std::string, workdir, "/tmp/neffcc_bench", "scratch directory");

extern char** environ;

namespace neffd::bench {
namespace {

struct Timing {
  double wall_ms = 0;
  double cpu_ms = 0;  // user + system of the process (not of the daemon)
};

// Runs `argv` with `env` added to this process's environment, output
// discarded, and times it; exits on a failed run.
Timing TimedRun(const std::vector<std::string>& argv,
                const std::vector<std::string>& env) {
  std::vector<std::string> full_env;
  for (char** e = environ; *e != nullptr; ++e) full_env.push_back(*e);
  full_env.insert(full_env.end(), env.begin(), env.end());
  std::vector<char*> c_argv, c_env;
  for (const std::string& a : argv)
    c_argv.push_back(const_cast<char*>(a.c_str()));
  for (const std::string& e : full_env)
    c_env.push_back(const_cast<char*>(e.c_str()));
  c_argv.push_back(nullptr);
  c_env.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  const absl::Time start = absl::Now();
  pid_t pid;
  if (posix_spawn(&pid, argv[0].c_str(), &actions, nullptr, c_argv.data(),
                  c_env.data()) != 0) {
    std::fprintf(stderr, "cannot run %s\n", argv[0].c_str());
    std::exit(1);
  }
  int status = 0;
  struct rusage usage {};
  wait4(pid, &status, 0, &usage);
  Timing timing;
  timing.wall_ms = absl::ToDoubleMilliseconds(absl::Now() - start);
  timing.cpu_ms =
      absl::ToDoubleMilliseconds(absl::DurationFromTimeval(usage.ru_utime) +
                                 absl::DurationFromTimeval(usage.ru_stime));
  posix_spawn_file_actions_destroy(&actions);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::fprintf(stderr, "%s failed (status %d)\n", argv[0].c_str(), status);
    std::exit(1);
  }
  return timing;
}

// Medians of both sides of a comparison.
class Comparison {
 public:
  void Add(const Timing& neffcc, const Timing& baseline) {
    wall_[0].push_back(neffcc.wall_ms);
    wall_[1].push_back(baseline.wall_ms);
    cpu_[0].push_back(neffcc.cpu_ms);
    cpu_[1].push_back(baseline.cpu_ms);
  }
  void Print(const std::string& name, const std::string& baseline) const {
    const double n = Median(wall_[0]), b = Median(wall_[1]);
    std::printf("| %s | %.1f | %s %.1f | %.2f | %+.1f | %.1f / %.1f |\n",
                name.c_str(), n, baseline.c_str(), b, n / b, n - b,
                Median(cpu_[0]), Median(cpu_[1]));
  }

 private:
  std::vector<double> wall_[2], cpu_[2];
};

struct Setup {
  std::string root;
  std::string neffcc;    // the masquerade symlink
  std::string compiler;  // the fake compiler
  std::vector<std::string> env;
};

std::vector<std::string> CompileArgv(const std::string& compiler,
                                     const std::string& input,
                                     const std::string& output) {
  return {compiler, "compile",  "--target=trn1", "--framework=XLA",
          input,    "--output", output,          "--verbose=35"};
}

std::string NewInput(const Setup& s, const std::string& name) {
  const std::string path = absl::StrCat(s.root, "/", name, ".hlo_module.pb");
  test_support::WriteFile(path,
                          absl::StrCat("HloModule ", name, " ", getpid(), " ",
                                       absl::ToUnixNanos(absl::Now())));
  return path;
}

void HitRow(const Setup& s, int size_mib, int runs) {
  const std::vector<std::string> env = {
      absl::StrCat("FAKE_NEURONX_CC_NEFF_BYTES=", int64_t{size_mib} << 20)};
  const std::string input = NewInput(s, absl::StrCat("hit", size_mib));
  const std::string first = s.root + "/first.neff";
  TimedRun(CompileArgv(s.neffcc, input, first), env);  // the miss
  Comparison hits;
  for (int i = 0; i < runs; ++i) {
    const std::string out = s.root + "/out.neff";
    const Timing cp = TimedRun({"/bin/cp", first, out}, {});
    unlink(out.c_str());
    hits.Add(TimedRun(CompileArgv(s.neffcc, input, out), env), cp);
    unlink(out.c_str());
  }
  unlink(first.c_str());
  hits.Print(absl::StrCat("hit, ", size_mib, " MiB NEFF"), "cp");
}

void MissRow(const Setup& s, int compile_ms, int runs) {
  const std::vector<std::string> env = {
      absl::StrCat("FAKE_NEURONX_CC_SLEEP_MS=", compile_ms)};
  Comparison misses;
  for (int i = 0; i < runs; ++i) {
    const std::string out = s.root + "/miss.neff";
    const Timing direct = TimedRun(
        CompileArgv(s.compiler, NewInput(s, absl::StrCat("direct", i)), out),
        env);
    misses.Add(TimedRun(CompileArgv(s.neffcc,
                                    NewInput(s, absl::StrCat("miss", i)), out),
                        env),
               direct);
  }
  misses.Print(absl::StrCat("miss, ", compile_ms, " ms compile"), "direct");
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  PrepareHarness(absl::GetFlag(FLAGS_workdir));
  Setup s;
  s.root = test_support::NewTempDir("neffcc");
  test_support::DaemonProcess daemon(s.root);
  if (!daemon.Start()) {
    std::fprintf(stderr, "neffd did not start: %s\n",
                 daemon.process().Stderr().c_str());
    return 1;
  }
  s.neffcc = s.root + "/mask/neuronx-cc";
  s.compiler = test_support::Runfile("tests/fake_neuronx_cc");
  if (mkdir((s.root + "/mask").c_str(), 0755) != 0 ||
      symlink(test_support::Runfile("client/neffcc").c_str(),
              s.neffcc.c_str()) != 0) {
    std::perror("creating the masquerade directory");
    return 1;
  }
  setenv("NEFFD_REAL_COMPILER", s.compiler.c_str(), 1);
  setenv("NEFFD_ADDRESS", daemon.address().c_str(), 1);
  setenv("TORCH_NEURONX_NEFF_CACHE_DIR", daemon.neff_dir().c_str(), 1);
  setenv("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", daemon.local_dir().c_str(), 1);
  setenv("TORCH_NEURONX_DEBUG_DIR", (s.root + "/debug").c_str(), 1);

  const int runs = absl::GetFlag(FLAGS_runs);
  std::printf("Machine: %s; %s; load average %s before.\n",
              MachineDescription().c_str(), NowUtc().c_str(),
              LoadAverage().c_str());
  std::printf(
      "Medians of %d runs, wall ms per call; CPU ms is user + system of the "
      "called process and its children (neffcc's include the compiler's).\n\n",
      runs);
  std::printf(
      "| case | neffcc ms | baseline ms | ratio | difference ms | CPU ms "
      "neffcc / baseline |\n");
  std::printf("|---|---|---|---|---|---|\n");
  for (const std::string& size : absl::GetFlag(FLAGS_sizes_mib)) {
    HitRow(s, std::stoi(size), runs);
  }
  MissRow(s, absl::GetFlag(FLAGS_compile_ms), runs);
  std::printf("\nLoad average %s after.\n", LoadAverage().c_str());
  return 0;
}

}  // namespace
}  // namespace neffd::bench

int main(int argc, char** argv) { return neffd::bench::Main(argc, argv); }
