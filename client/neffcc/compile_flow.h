// client/neffcc/compile_flow.h
//
// One `neuronx-cc compile` answered from neffd (ParseCompile accepted it):
//
//   key   CacheClient::DeriveKey over the input file's bytes (never its
//         path), the keyed flags (command_line.h), the real compiler's
//         version and the platform target (--target, else
//         NEURON_PLATFORM_TARGET_OVERRIDE); namespace "neff".
//   hit   the NEFF's bytes are placed at the caller's --output as a file of
//         its own (reflink where the filesystem can, else a copy; written
//         beside it and renamed in, never a link into the cache), stdout's
//         last line is "Compiler status PASS", exit 0.
//   miss  the key-inputs record (client/explain.h) is written to
//         MissRecordPath(local_dir, key); then CacheClient::GetOrCompile runs
//         the real compiler once per key on the host (and, through the
//         daemons, the cluster) with the caller's arguments, --output
//         pointing into the compile's working directory, stdout and stderr
//         passed through live. The NEFF is published with the record as
//         kKeyInputsMetadata (and so compile_flags.json), then placed at
//         --output like a hit. Concurrent callers of the key wait and get it.
//   fail  the compiling caller exits with the compiler's exit status (its
//         output was already shown). Only a verdict is shared (Verdict):
//         a failure is recorded only when the compiler ran to its end and
//         said so, a nonzero exit status with "Compiler status ERROR" in its
//         output. The recorded failure log starts with the line "neffcc:
//         compiler exit status N" (kExitStatusLine) and then holds the tail
//         of the compiler's stdout and stderr; callers that waited, and
//         every caller until the failure's retry-after time (or `neffctl
//         forget`), print that text on stderr and exit with N, without
//         compiling. A compiler killed by a signal (its caller exits 128 +
//         signal), one that exits nonzero without the verdict (out of
//         memory, "Killed") and one whose output cannot be written are that
//         caller's alone: nothing is recorded and the next caller (a waiter
//         included) compiles again.
//
// NEFFD_NO_COMPILE=1 turns a miss into exit kExitNoCompile with the key and
// the explanation on stderr; NEFFD_EXPLAIN=1 writes "neffcc: <ExplainMiss>"
// on stderr for every miss. The cached records compared come from the daemon
// (CacheAdmin.ListEntries) or, without a daemon, from the compile_flags.json
// files of the shared store (cached_inputs.h).
//
// Thread-compatible: one call per process.
#ifndef NEFFD_CLIENT_NEFFCC_COMPILE_FLOW_H_
#define NEFFD_CLIENT_NEFFCC_COMPILE_FLOW_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cache_client.h"
#include "client/explain.h"
#include "client/neffcc/command_line.h"

namespace neffd::neffcc {

// A miss under NEFFD_NO_COMPILE=1 (EX_TEMPFAIL: nothing was wrong with the
// input; the compile was not allowed here).
inline constexpr int kExitNoCompile = 75;
// neffcc could not deliver a result it had (e.g. --output not writable).
inline constexpr int kExitNeffccError = 1;
// The first line of a failure log neffcc records; %d is the exit status.
inline constexpr char kExitStatusLine[] = "neffcc: compiler exit status ";
// What neuronx-cc prints when it ran to its end and the compile failed.
inline constexpr char kErrorVerdict[] = "Compiler status ERROR";

struct CompileFlowOptions {
  std::string compiler;  // the real compiler's path
  std::string compiler_version;
  std::vector<std::string> compiler_args;  // as given, "compile" first
  CompileCommand command;                  // ParseCompile(compiler_args)
  std::vector<std::string> invocation;     // neffcc's argv, for the record
  bool no_compile = false;                 // NEFFD_NO_COMPILE
  bool explain = false;                    // NEFFD_EXPLAIN
};

// Answers the compile and returns the process's exit code. An error means
// the call cannot be cached (an option's value names a file) or the cache
// could not be asked at all (unreadable input, a key that cannot be
// derived) before anything ran: the caller runs the real compiler
// unchanged.
absl::StatusOr<int> RunCachedCompile(CacheClient& client,
                                     const CompileFlowOptions& options);

// The key of `command` with the input's bytes `input` (see the file
// comment); shared with the import of libneuronxla caches (import.h).
absl::StatusOr<std::string> DeriveCompileKey(const CacheClient& client,
                                             const CompileCommand& command,
                                             absl::string_view input,
                                             const std::string& version);

// The key-inputs record published with the entry (client/explain.h).
v1::KeyInputsRecord MakeKeyInputs(const CacheClient& client,
                                  const CompileCommand& command,
                                  absl::string_view input,
                                  const std::string& version,
                                  const std::vector<std::string>& invocation);

// What a compiler run means for the cache: Ok (exit 0), a CompilerError to
// record (nonzero exit with kErrorVerdict in `output`), else Cancelled.
CompileResult Verdict(int wait_status, const std::string& output);

// The exit status a recorded failure log carries (1 if it has none).
int ExitStatusOfFailureLog(absl::string_view log);

}  // namespace neffd::neffcc

#endif  // NEFFD_CLIENT_NEFFCC_COMPILE_FLOW_H_
