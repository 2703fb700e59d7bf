// examples/fake_compiler.h
//
// A stand-in for neuronx-cc, for the rank simulators, tests and benchmarks.
// FakeCompile behaves like a compile in the spec's working directory: it
// writes compiler_args.txt, metadata.txt and log-neuron-cc.txt, then writes
// half of the output, sleeps for the compile time, and writes the rest (so a
// rank killed mid-compile leaves a partial module.neff behind). The output
// is FakeNeffBytes(key, neff_bytes): N bytes derived from the key only, so
// every compile of a key produces the same bytes and any rank can check what
// it got. Keys listed in fail_keys fail deterministically with a log.
//
// Every compile appends one line "{key} {pid} {rank}\n" to compile_log (one
// O_APPEND write), which tests count.
//
// Thread-safe.
#ifndef NEFFD_EXAMPLES_FAKE_COMPILER_H_
#define NEFFD_EXAMPLES_FAKE_COMPILER_H_

#include <cstdint>
#include <set>
#include <string>

#include "absl/time/time.h"
#include "client/cache_client.h"

namespace neffd::examples {

// 64-byte blocks, each the first 48 hex digits of SHA-256("{key}") and then
// the block's index i = 0, 1, ... as 16 hex digits, cut to `size`: distinct
// per key and per position, so a torn or misplaced block changes the digest.
// (examples/rank_sim.py computes the same bytes.)
std::string FakeNeffBytes(const std::string& key, size_t size);

struct FakeCompilerOptions {
  absl::Duration compile_time = absl::Milliseconds(100);
  size_t neff_bytes = 64 << 10;
  std::string compile_log;  // empty: not logged
  std::set<std::string> fail_keys;
  int64_t rank = 0;
};

CompileResult FakeCompile(const CompileJob& job,
                          const FakeCompilerOptions& options);

}  // namespace neffd::examples

#endif  // NEFFD_EXAMPLES_FAKE_COMPILER_H_
