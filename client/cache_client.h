// client/cache_client.h
//
// CacheClient is what a training rank links to get compiled artifacts: one
// call, GetOrCompile, returns the path of a NEFF (or HLO entry) and compiles
// it only if nobody on the host has it or is compiling it
// (docs/ARCHITECTURE.md, "Request paths").
//
//   GetOrCompile = Lookup -> Lock (wait up to
//   TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT) -> compile_fn in the entry's
//   working directory while a background heartbeat keeps the lease ->
//   Publish -> the entry's path.
//
// A rank that waited gets READY and the path without compiling. The contract,
// line by line:
//  * Compile failures. compile_fn returning CompilerError is recorded
//    (Unlock FAILED with the log); every waiter, and every caller until the
//    failure's retry-after time, gets the same failure as an error for which
//    IsCompileFailure() is true. Cancelled (and a crash or signal of the
//    process, or an exception escaping compile_fn) abandons the lease: nothing
//    is recorded and the next waiter compiles.
//  * Lock timeout. The rank compiles it itself (with a warning) and publishes
//    if the key is free by then; otherwise it returns its own output,
//    uncached. A timeout is never an error.
//  * No daemon. When a call to neffd fails (unreachable, restarting, or an
//    error of its own) the same protocol runs directly on the filesystem:
//    flock on the daemon's lock files under
//    {TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR}/locks, atomic publish into the same
//    layout through store/'s Store. One warning per process. Every call
//    tries the daemon first, so a daemon that comes back is used again. A
//    daemon that dies during a compile costs at most that compile: the
//    finished output waits in the working directory and is published by
//    whoever holds the key next.
//  * Working directory (the spec's artifact hierarchy):
//    {TORCH_NEURONX_DEBUG_DIR}/neuronx-cc/{key}/ (hlo: .../hlo/{key}/);
//    compile_fn writes CompileJob::output_path (module.neff) there. After a
//    successful publish it is removed unless
//    TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS=1; after a failure it is
//    always kept and its path is in the error. See client/workdir.h.
//  * TORCH_NEURONX_NEFF_DISABLE_CACHE=1 (neff) / TORCH_NEURONX_HLO_CACHE=0
//    (hlo): always compile, never look up or publish; the result is the
//    output in a private working directory, which is kept.
//  * Metrics: client/metrics.h; written after calls (at most once a second)
//    and when the client is destroyed.
//
// Settings come from the config registry (config/env.h) once, at creation.
//
// Thread-safe: one CacheClient per process, shared by all threads. Concurrent
// calls for the same key from one process exclude each other like calls from
// different processes. compile_fn runs on the calling thread.
#ifndef NEFFD_CLIENT_CACHE_CLIENT_H_
#define NEFFD_CLIENT_CACHE_CLIENT_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/daemon_channel.h"
#include "client/file_lock.h"
#include "client/metrics.h"
#include "config/defaults.h"
#include "config/env.h"
#include "store/env.h"

namespace neffd {

namespace v1 {
class LookupResponse;
}  // namespace v1

class Backend;
class EntryKey;
class Lease;
class WorkDir;
struct CopyResult;

struct CacheClientOptions {
  // Reads every setting from `env` (see the field comments).
  static CacheClientOptions FromEnv(const config::EnvSnapshot& env);

  std::string address;  // "" = NEFFD_ADDRESS / default socket
  ClientTls tls;  // mutual TLS for a TCP address (client/daemon_channel.h)
  bool use_daemon = true;      // false: always the filesystem (tests, tools)
  std::string neff_cache_dir;  // TORCH_NEURONX_NEFF_CACHE_DIR
  std::string hlo_cache_dir;   // TORCH_NEURONX_HLO_CACHE_DIR
  std::string local_dir;       // TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR
  std::string debug_dir;       // TORCH_NEURONX_DEBUG_DIR
  bool neff_cache_disabled = false;  // TORCH_NEURONX_NEFF_DISABLE_CACHE
  bool hlo_cache_enabled = true;     // TORCH_NEURONX_HLO_CACHE
  bool key_from_hlo = true;          // TORCH_NEURONX_NEFF_KEY_FROM_HLO
  bool preserve_artifacts = false;   // ..._PRESERVE_COMPILATION_ARTIFACTS
  bool compile_only = false;         // TORCH_NEURONX_COMPILE_ONLY
  std::string platform_target;       // NEURON_PLATFORM_TARGET_OVERRIDE
  absl::Duration lock_timeout = config::kLockTimeout;
  std::vector<std::string> metric_tables;  // ..._ENABLED_METRIC_TABLES
  std::string metrics_dir = "/tmp";        // TORCH_NEURONX_METRICS_DIR
  int64_t rank = 0;                        // RANK
  std::string host;                        // "" = gethostname()
  // How long a failure recorded in fallback mode is in force (the daemon's
  // --failed_ttl default).
  absl::Duration failed_ttl = config::kFailedTtl;
  Env* env = Env::Default();  // the clock, sleeps and threads
  // Receives warnings; default: one line on stderr.
  std::function<void(const std::string&)> warn;
};

// What compile_fn is asked to do.
struct CompileJob {
  std::string ns;
  std::string compiler_version;
  std::string key;
  std::string workdir;      // exists and is empty (or holds a failed run)
  std::string output_path;  // {workdir}/module.neff or module.hlo.pb
};

// What compile_fn reports.
struct CompileResult {
  enum class Kind { kOk, kCompilerError, kCancelled };

  // output_path holds the whole artifact.
  static CompileResult Ok() { return {Kind::kOk, ""}; }
  // A deterministic compiler error; recorded. An empty `log` means the
  // tail of {workdir}/log-neuron-cc.txt.
  static CompileResult CompilerError(std::string log) {
    return {Kind::kCompilerError, std::move(log)};
  }
  // Interrupted, killed, out of memory...: not recorded.
  static CompileResult Cancelled(std::string why) {
    return {Kind::kCancelled, std::move(why)};
  }
  // For a compiler run as a child process, from its waitpid() status:
  // exit 0 is Ok, another exit code a CompilerError, a signal Cancelled.
  static CompileResult FromWaitStatus(int wait_status, std::string log);

  Kind kind = Kind::kOk;
  std::string log;
};

using CompileFn = std::function<CompileResult(const CompileJob&)>;

// Recorded with a published entry (model.done, the daemon's index,
// ListEntries); kKeyInputsMetadata (store/store.h) is also written into the
// entry directory as compile_flags.json.
using PublishMetadata = std::map<std::string, std::string>;

struct CacheResult {
  enum class Source {
    kHit,       // in the cache when asked
    kWaited,    // published by another compile while this rank waited
    kCompiled,  // compiled here and published
    kUncached,  // compiled here, not in the cache (disabled, or the lock
                // stayed busy); the path is in the working directory
  };
  std::string path;
  uint64_t size = 0;
  std::string sha256;
  Source source = Source::kHit;
  bool fallback = false;  // served without the daemon
};

// A compile failure carried by an error status (code kAborted).
struct CompileFailure {
  std::string log;
  absl::Time retry_after = absl::InfinitePast();  // unknown if InfinitePast
  std::string workdir;  // where this rank compiled; empty for a waiter
};
bool IsCompileFailure(const absl::Status& status);
std::optional<CompileFailure> GetCompileFailure(const absl::Status& status);

class CacheClient {
 public:
  // Settings from the process environment; `address` overrides
  // NEFFD_ADDRESS when non-empty. Prints the registry's warnings.
  static std::unique_ptr<CacheClient> FromEnvironment(
      const std::string& address = "");
  // The same with `tls` for a TCP address (the C ABI's and the Python
  // module's TLS options). InvalidArgument naming the file if one it names
  // cannot be read (CheckTlsFiles); a set that is not whole (no client
  // certificate, say) is what CacheClientOptions::tls makes of it: a
  // warning at the first connect, no TLS, and so the filesystem.
  static absl::StatusOr<std::unique_ptr<CacheClient>> FromEnvironment(
      const std::string& address, const ClientTls& tls);

  explicit CacheClient(CacheClientOptions options);
  // Writes the metric tables one last time.
  ~CacheClient();
  CacheClient(const CacheClient&) = delete;
  CacheClient& operator=(const CacheClient&) = delete;

  const CacheClientOptions& options() const { return options_; }

  // The key for a lowered graph (client/key.h): from `hlo_bytes`, or from
  // `base_key` when TORCH_NEURONX_NEFF_KEY_FROM_HLO=0, plus the canonical
  // flags, the compiler version and the platform target. An empty
  // `platform_target` means NEURON_PLATFORM_TARGET_OVERRIDE (or the live
  // instance's); with TORCH_NEURONX_COMPILE_ONLY=1 one of them must be known.
  absl::StatusOr<std::string> DeriveKey(absl::string_view hlo_bytes,
                                        absl::string_view compiler_flags,
                                        absl::string_view compiler_version,
                                        absl::string_view platform_target,
                                        absl::string_view base_key = "") const;

  // See the file comment. InvalidArgument for a bad namespace, version or
  // key; kAborted with a CompileFailure for a compile failure; kCancelled
  // when compile_fn was cancelled. The daemon's absence or a lock timeout is
  // never an error. `metadata` goes with the entry if this call publishes it.
  absl::StatusOr<CacheResult> GetOrCompile(
      absl::string_view ns, absl::string_view compiler_version,
      absl::string_view key, const CompileFn& compile_fn,
      const PublishMetadata& metadata = {});

  // The entry if it is cached, nullopt on a miss (or when that namespace's
  // cache is disabled), a CompileFailure error while a recorded failure is
  // in force.
  absl::StatusOr<std::optional<CacheResult>> Lookup(
      absl::string_view ns, absl::string_view compiler_version,
      absl::string_view key);

  // Rows of the "allocator" metric table (e.g. a NeuronSegmentPool's
  // MemoryStatsToDict(pool->GetStats())).
  void SetAllocatorStats(StatsSource source);

  CacheCounters counters() const;
  // Writes the enabled metric tables now.
  absl::Status WriteMetrics();

 private:
  friend class TorchNeuronCache;  // drives Lock and Publish itself
  struct Call;

  bool CacheEnabled(const EntryKey& id) const;
  Backend& Daemon();
  // Runs `op` on the daemon, or on the filesystem once the daemon has
  // failed during this call.
  template <typename T>
  absl::StatusOr<T> WithFallback(
      Call& call, const std::function<absl::StatusOr<T>(Backend&)>& op);
  // WithFallback's core, also for client/torchneuron_cache.h: `fallback`
  // becomes true once the filesystem answers.
  absl::Status OnBackend(bool& fallback, bool& counted_fallback,
                         const std::function<absl::Status(Backend&)>& op);
  absl::StatusOr<v1::LookupResponse> LookupEntry(Call& call);
  // One pass of the protocol; nullopt when the lease was lost and the
  // caller should start over.
  absl::StatusOr<std::optional<CacheResult>> Attempt(Call& call);
  absl::StatusOr<std::optional<CacheResult>> CompileUnderLease(
      Call& call, std::unique_ptr<Lease> lease);
  absl::StatusOr<CacheResult> CompileThenTryPublish(Call& call);
  absl::StatusOr<CacheResult> CompileUncached(Call& call,
                                              const std::string& why);
  // The whole output an earlier holder left in `dir`, else RunCompile.
  absl::StatusOr<CopyResult> AdoptOrCompile(Call& call, WorkDir& dir,
                                            Lease* lease);
  // Runs compile_fn in `dir`; on success the output's size and digest.
  absl::StatusOr<CopyResult> RunCompile(Call& call, WorkDir& dir, Lease* lease);
  // A published (or found) result: the directory's job is done.
  CacheResult Finish(Call& call, WorkDir& dir, const CacheResult& result);
  // A result that stays in `dir`, which is kept.
  CacheResult Uncached(Call& call, WorkDir& dir, const CopyResult& content);
  void Warn(const std::string& message);
  void WarnOncePerProcess(const std::string& message);
  void Count(const std::function<void(CacheCounters&)>& update);
  void MaybeWriteMetrics();

  const CacheClientOptions options_;
  const MetricsWriter metrics_;
  std::unique_ptr<Backend> filesystem_;
  mutable absl::Mutex mu_;
  std::unique_ptr<Backend> daemon_ ABSL_GUARDED_BY(mu_);
  CacheCounters counters_ ABSL_GUARDED_BY(mu_);
  StatsSource allocator_stats_ ABSL_GUARDED_BY(mu_);
  absl::Time last_metrics_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace neffd

#endif  // NEFFD_CLIENT_CACHE_CLIENT_H_
