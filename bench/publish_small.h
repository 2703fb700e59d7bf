// bench/publish_small.h
//
// The small publish of issue 30, run by `publish_bench --small_kib=N`: a
// NEFF of N KiB published through a real neffd, in one run beside the
// hand-written durable write of the same bytes (open, write, fsync, rename,
// fsync of the directory, in the store's directory), with the sides
// interleaved and rotated so none always runs first:
//   - end to end through the client library (compile_fn returns ->
//     GetOrCompile returns: the client's staging, Publish, the daemon's
//     store copy and fsyncs), with the daemon's CPU and the client
//     process's own in that window, and across the whole GetOrCompile
//     (its Lock and Hold stream included);
//   - the Publish RPC alone of an already staged file (Lock not timed), with
//     the daemon's CPU across it;
//   - the daemon's CPU per call for the calls made before a compile (a
//     Lookup of a missing key, a Lock and Unlock, the same with a Hold
//     stream).
// CPU figures are read from the processes' CPU-time clocks (nanoseconds;
// bench_util.h) and reported as means over all runs: they include the
// daemon's background work (heartbeats, index flushes) during the run.
//
// Thread-compatible; exits the process with a message on any failure.
#ifndef NEFFD_BENCH_PUBLISH_SMALL_H_
#define NEFFD_BENCH_PUBLISH_SMALL_H_

#include <string>

namespace neffd::bench {

// Runs `runs` repetitions and prints the table (also to `markdown` if not
// empty), naming the build `label`. Returns the process's exit code.
int RunSmallPublish(const std::string& workdir, int kib, int runs,
                    const std::string& label, const std::string& markdown);

}  // namespace neffd::bench

#endif  // NEFFD_BENCH_PUBLISH_SMALL_H_
