// bench/bench_util.h
//
// What every neffd benchmark reports beside its figures (docs/BENCHMARKS.md
// rules): the machine (nproc, CPU model, RAM), the time and the load
// average, medians over repetitions and percentiles of latency samples; and
// the daemon-side facts they sample (VmRSS of a process, whether a unix
// socket accepts, health SERVING). Also points a bench binary's runfiles at
// itself so tests/harness finds `neffd` when run outside `bazel run`.
//
// Thread-compatible free functions.
#ifndef NEFFD_BENCH_BENCH_UTIL_H_
#define NEFFD_BENCH_BENCH_UTIL_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace neffd::bench {

// Sets TEST_TMPDIR to `workdir` (created empty) and TEST_SRCDIR to this
// binary's runfiles, as tests/harness expects.
void PrepareHarness(const std::string& workdir);

// The middle element (upper middle for even sizes); 0 if empty.
double Median(std::vector<double> values);
// The q-quantile (0..1) by rank on a sorted copy; 0 if empty.
double Percentile(std::vector<double> values, double q);

// "nproc 2, AMD EPYC, 23.4 GiB RAM".
std::string MachineDescription();
// "1.23 0.98 0.50" from /proc/loadavg.
std::string LoadAverage();
// UTC, "2026-12-02 15:04".
std::string NowUtc();

// VmRSS of `pid` in MiB, or -1.
double RssMiB(pid_t pid);

// CPU seconds (user + system, every thread, exited ones included) that
// process `pid` has used so far, from its CPU-time clock: nanoseconds, where
// /proc/<pid>/stat counts 10 ms ticks, which a 2 ms figure cannot be read
// from. -1 if the process is gone.
double CpuSeconds(pid_t pid);
// The same for this process.
double SelfCpuSeconds();

// Waits (polling every 1 ms, at most `timeout`) until the gRPC health
// service at unix `socket_path` answers SERVING. False on timeout.
bool WaitServing(const std::string& socket_path, absl::Duration timeout);

// Writes `text` to `path`; exits the process with a message on failure.
void WriteOrDie(const std::string& path, const std::string& text);

}  // namespace neffd::bench

#endif  // NEFFD_BENCH_BENCH_UTIL_H_
