// The registry: one VarSpec per environment variable, in the order of
// torch-neuronx-env-vars.rst, then neffd's own. Descriptions are the spec's.
// To add a variable, add a row here and a case to config/env_test.cc, then
// regenerate docs/CONFIG.md (`bazel run //config:neuronx-env -- --markdown`).

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "config/env.h"
#include "config/parse.h"

namespace neffd::config {
namespace {

constexpr int64_t kNoMax = std::numeric_limits<int64_t>::max();
// A sanity bound for NeuronCore indices; no instance has this many.
constexpr int64_t kMaxCoreIndex = 65535;

constexpr unsigned kNeffd = kDaemon | kClient;

constexpr VarSpec Var(const char* section, const char* name, Type type,
                      Rule rule, const char* default_value, unsigned readers,
                      const char* doc) {
  VarSpec spec{};
  spec.name = name;
  spec.section = section;
  spec.type = type;
  spec.rule = rule;
  spec.default_value = default_value;
  spec.derivation = Derivation::kNone;
  spec.max = kNoMax;
  spec.readers = readers;
  spec.doc = doc;
  return spec;
}

constexpr VarSpec Bool(const char* section, const char* name,
                       const char* default_value, unsigned readers,
                       const char* doc) {
  return Var(section, name, Type::kBool, Rule::kBool, default_value, readers,
             doc);
}

constexpr VarSpec Int(const char* section, const char* name,
                      const char* default_value, int64_t min, int64_t max,
                      unsigned readers, const char* doc) {
  VarSpec spec =
      Var(section, name, Type::kInt, Rule::kInt, default_value, readers, doc);
  spec.min = min;
  spec.max = max;
  return spec;
}

// A spec whose default is computed; `shown` is how the docs state it.
constexpr VarSpec Derived(VarSpec spec, Derivation derivation,
                          const char* shown) {
  spec.derivation = derivation;
  spec.default_doc = shown;
  return spec;
}

constexpr const char kBackend[] = "neuron backend for torch.compile";
constexpr const char kCache[] = "Persistent NEFF / HLO cache";
constexpr const char kEager[] = "General (eager execution)";
constexpr const char kMetrics[] = "Metrics";
constexpr const char kProfiling[] = "Profiling";
constexpr const char kDistributed[] = "Distributed";
constexpr const char kAllocatorSection[] =
    "Neuron memory allocator configuration";
constexpr const char kNeffdSection[] = "neffd";

VarSpec MakeSplit(const char* name, const char* doc) {
  return Derived(Var(kDistributed, name, Type::kBool, Rule::kOnlyOneOn, nullptr,
                     kTorchNeuronx, doc),
                 Derivation::kStream,
                 "on for the default stream, off for other streams");
}

VarSpec MakeIntList(const char* section, const char* name, Rule rule,
                    const char* default_value, int64_t max, const char* doc) {
  VarSpec spec = Var(section, name, Type::kIntList, rule, default_value,
                     kTorchNeuronx, doc);
  spec.max = max;
  return spec;
}

std::vector<VarSpec> MakeRegistry() {
  VarSpec profile_modes =
      Var(kProfiling, "TORCH_NEURONX_PROFILE_MODES", Type::kStringList,
          Rule::kChoices, "runtime,cpu_util,host_memory", kTorchNeuronx,
          "Comma-separated profile modes. Add `device` for the device "
          "profile. The device profile reserves device memory for hardware "
          "notifications.");
  profile_modes.choices = "runtime,cpu_util,host_memory,device";
  VarSpec host_cc =
      Bool(kDistributed, "TORCH_NEURONX_ENABLE_HOST_CC", "false", kTorchNeuronx,
           "When `1`, enables collectives to execute on non-default streams, "
           "allowing communication to overlap with computation. Requires "
           "TORCH_NEURONX_ENABLE_STREAMS=1 (the default).");
  host_cc.requires_true = "TORCH_NEURONX_ENABLE_STREAMS";

  return {
      Var(kBackend, "TORCH_NEURONX_DEBUG_DIR", Type::kString, Rule::kNonEmpty,
          "/tmp/neuron_backend", kClient | kTorchNeuronx,
          "Directory where compilation artifacts (FX graphs, StableHLO IR, "
          "NEFF files) are saved."),
      Bool(kBackend, "TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS", "false",
           kClient | kTorchNeuronx,
           "When `1`, keeps compilation artifacts after execution. Useful for "
           "debugging via IR inspection."),
      Bool(kBackend, "TORCH_NEURONX_DISABLE_FALLBACK_EXECUTION", "true",
           kTorchNeuronx,
           "When `1` (the default), a `torch.compile(backend=\"neuron\")` "
           "graph that fails to compile raises the error instead of falling "
           "back to eager execution of the original graph. Set to `0` to fall "
           "back to eager execution on a compile failure. Affects the "
           "`torch.compile` path only; the `fallback_execution` compile "
           "option overrides it."),
      Derived(Bool(kBackend, "TORCH_NEURONX_COMPLEX_DECOMPOSE", nullptr,
                   kTorchNeuronx,
                   "Enables framework decomposition of complex operations "
                   "before lowering. When disabled, verified native complex "
                   "operations use compiler lowering and other operations "
                   "follow the existing fallback policy."),
              Derivation::kTorchVersion,
              "PyTorch >= 2.13: true; otherwise (or unknown) false"),
      Bool(kBackend, "TORCH_NEURONX_DYNAMO_DISABLE_CPU_AUTOCOPY", "false",
           kTorchNeuronx,
           "When `1`, raises an error if CPU tensors are passed as inputs "
           "instead of auto-copying to Neuron."),
      Bool(kBackend, "TORCH_NEURONX_COMPILE_ONLY", "false",
           kClient | kTorchNeuronx,
           "When `1`, compile to NEFF without device execution. Ops compile "
           "but never run; `nrt_init` failure is non-fatal. Also set by "
           "`torch_neuronx.compiler.compile_only()`."),
      Var(kBackend, "TORCH_NEURONX_DYNAMO_TENSOR_DUMPS", Type::kString,
          Rule::kAnyString, nullptr, kTorchNeuronx,
          "When set, the `inputs/` and `outputs/` directories of each job "
          "under `TORCH_NEURONX_DEBUG_DIR` receive tensor dumps."),
      Derived(Var(kBackend, "NEURON_PLATFORM_TARGET_OVERRIDE", Type::kString,
                  Rule::kPlatform, nullptr, kClient | kTorchNeuronx,
                  "Target platform (for example `trn2`, `trn3`) for "
                  "cross-compilation on a device-less host. Also set via "
                  "`CompileOptions(target=...)`."),
              Derivation::kInstanceType,
              "the live instance's (trn2.48xlarge: trn2); unset elsewhere"),

      Var(kCache, "TORCH_NEURONX_NEFF_CACHE_DIR", Type::kPath,
          Rule::kAbsolutePath, "/tmp/neff_cache", kNeffd,
          "Directory for persistent NEFF cache. Point at a shared mount (for "
          "example, FSx) to reuse compiled NEFFs across runs and instances."),
      Var(kCache, "TORCH_NEURONX_HLO_CACHE_DIR", Type::kPath,
          Rule::kAbsolutePath, "/tmp/hlo_cache", kNeffd,
          "Directory for persistent HLO cache, shared by the eager and "
          "`torch.compile` entry points."),
      Bool(kCache, "TORCH_NEURONX_HLO_CACHE", "true", kClient | kTorchNeuronx,
           "When `1`, eager ops cache their HLO lowering to disk, keyed by "
           "the dispatch key."),
      Var(kCache, "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", Type::kPath,
          Rule::kAbsolutePath, "/tmp/local_cache", kNeffd,
          "Local directory for filelocks and scratch. **Must stay on a local "
          "POSIX filesystem** (NFS/Lustre lock semantics are unreliable)."),
      Bool(kCache, "TORCH_NEURONX_NEFF_DISABLE_CACHE", "false", kClient,
           "When `1`, disables the persistent NEFF cache entirely. Every "
           "compile runs fresh."),
      Int(kCache, "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", "1200", 0, kNoMax,
          kNeffd,
          "Seconds to wait for the per-key compile lock before giving up."),
      Bool(kCache, "TORCH_NEURONX_NEFF_KEY_FROM_HLO", "true", kClient,
           "When `1` (the default), the persistent NEFF key is derived from "
           "the lowered HLO bytes plus compiler config (instead of the "
           "in-memory base_key). Lets benign Python edits re-trace and "
           "re-lower without busting the on-disk cache. Set to `0` to use "
           "the in-memory base_key."),
      Bool(kCache, "NKI_ENABLE_TRACE_CACHE", "true", kTorchNeuronx,
           "When `1`, the NKI kernel compile cache is persisted across "
           "processes at `/var/tmp/nki-trace-cache-uid/` (or "
           "`NKI_TRACE_CACHE_URL` if set). Only files under a "
           "`site-packages`/`dist-packages` tree that map to an installed "
           "wheel get captured in the caching process. An editable install, "
           "a vendored copy, or any tree with no `.dist-info` does not "
           "resolve to a version and will not be tracked, potentially "
           "resulting in a stale cache hit. Additionally, the kernel is "
           "assumed to be a pure function of its declared arguments and its "
           "source. Any value that steers control flow should be passed as "
           "an argument to the kernel; otherwise a change to that value "
           "might not be detected and could also result in a stale cache "
           "hit."),
      Derived(Var(kCache, "NKI_TRACE_CACHE_URL", Type::kString, Rule::kNonEmpty,
                  nullptr, kTorchNeuronx,
                  "Where the NKI kernel compile cache is persisted when "
                  "`NKI_ENABLE_TRACE_CACHE` is on."),
              Derivation::kUid, "`/var/tmp/nki-trace-cache-<uid>/`"),
      Bool(kCache, "TORCH_CACHING_PRECOMPILE", "false", kTorchNeuronx,
           "When `1`, enables the PyTorch Dynamo precompile cache, which "
           "caches the backend result of the Dynamo trace of any "
           "`torch.compile`-ed modules or functions. Saved at "
           "`TORCHINDUCTOR_CACHE_DIR`, split by subdirectories per rank if "
           "applicable. For the `neuron` backend the HLO result is cached, "
           "separate from the HLO cache. Delete `TORCHINDUCTOR_CACHE_DIR` to "
           "clear this cache. Off by default."),
      Derived(Var(kCache, "TORCHINDUCTOR_CACHE_DIR", Type::kPath,
                  Rule::kNonEmpty, nullptr, kTorchNeuronx,
                  "Directory for the torch inductor cache. This is a PyTorch "
                  "variable and affects the location of other caches as "
                  "well. Refer to the PyTorch documentation for details on "
                  "other caches."),
              Derivation::kUserName, "`/tmp/torchinductor_<user name>/`"),

      Bool(kEager, "NEURON_LAUNCH_BLOCKING", "false", kTorchNeuronx,
           "When `1`, forces synchronous execution. Useful for debugging."),
      Bool(kEager, "TORCH_NEURONX_FALLBACK_ONLY_FOR_UNIMPLEMENTED_OPS", "false",
           kTorchNeuronx,
           "When `1`, only falls back to CPU for unimplemented ops, not "
           "execution errors."),
      Bool(kEager, "TORCH_NEURONX_ENABLE_STACK_TRACE", "false", kTorchNeuronx,
           "When `1`, captures Python stack traces per operation. Adds "
           "overhead."),
      Int(kEager, "TORCH_NEURONX_LOG_LEVEL", "1", 0, 3, kNeffd | kTorchNeuronx,
          "Log verbosity: `0` = ERROR, `1` = WARNING (the default), `2` = "
          "INFO, `3` = DEBUG."),
      Bool(kEager, "TORCH_NEURONX_USE_PINNED_MALLOC", "false", kTorchNeuronx,
           "(Experimental) When `1`, uses driver-pinned host memory."),

      Var(kMetrics, "TORCH_NEURONX_ENABLED_METRIC_TABLES", Type::kStringList,
          Rule::kNames, "", kClient | kTorchNeuronx,
          "Comma-separated metric tables to enable for CSV export."),
      Var(kMetrics, "TORCH_NEURONX_METRICS_DIR", Type::kString, Rule::kNonEmpty,
          "/tmp", kClient | kTorchNeuronx, "Directory for metric CSV files."),

      Bool(kProfiling, "TORCH_NEURONX_PROFILE_DEFAULT_SESSION", "true",
           kTorchNeuronx,
           "Set to `0` to disable the default session. Then "
           "`ProfilerActivity.PrivateUse1` without a `NeuronConfig` records "
           "no Neuron data."),
      profile_modes,
      MakeIntList(kProfiling, "TORCH_NEURONX_PROFILE_RANKS", Rule::kIntList,
                  "0", kNoMax,
                  "Comma-separated global ranks that capture a profile. The "
                  "rank comes from the `RANK` environment variable."),
      Int(kProfiling, "TORCH_NEURONX_PROFILE_MAX_EVENTS_PER_NC", "10000000", 1,
          kNoMax, kTorchNeuronx,
          "Maximum number of system trace events for each NeuronCore."),
      MakeIntList(kProfiling, "TORCH_NEURONX_PROFILE_CAPTURE_NC",
                  Rule::kIndexRanges, "0,1", kMaxCoreIndex,
                  "NeuronCore indices or ranges to capture, for example "
                  "`0,1,2-5`."),
      Var(kProfiling, "TORCH_NEURONX_PROFILE_OUTPUT_DIR", Type::kPath,
          Rule::kNonEmpty, "neuron_profile", kTorchNeuronx,
          "Directory for the profile session output. With the `device` mode, "
          "the session copies the NEFFs from `TORCH_NEURONX_NEFF_CACHE_DIR` "
          "(default `/tmp/neff_cache`) to the `neffs` directory in "
          "`TORCH_NEURONX_PROFILE_OUTPUT_DIR`. The device profile needs these "
          "NEFFs."),
      Int(kProfiling, "RANK", "0", 0, kNoMax, kClient | kTorchNeuronx,
          "Global rank of this process (set by the launcher, e.g. "
          "torchrun). Selects profile capture through "
          "`TORCH_NEURONX_PROFILE_RANKS`; neffd records it in lock holders."),

      Var(kDistributed, "TORCH_NEURONX_ENABLE_STREAMS", Type::kBool,
          Rule::kBool01, "1", kTorchNeuronx,
          "When `1` (the default), Neuron streams are enabled and work can be "
          "submitted to the default stream or non-default streams. By "
          "default, compiled operations containing collectives are routed to "
          "the default stream while preserving execution ordering. When "
          "`0`, all streams alias the default stream. Only `0` and `1` are "
          "accepted."),
      host_cc,
      MakeSplit("NEURON_USE_SPLIT_ALLGATHER",
                "Enables split-based allgather for better memory efficiency. "
                "When unset, the default depends on the stream; when set, "
                "only `1` enables it and any other value disables it."),
      MakeSplit("NEURON_USE_SPLIT_REDUCE_SCATTER",
                "Enables split-based reduce_scatter. When unset, the default "
                "depends on the stream; when set, only `1` enables it and any "
                "other value disables it."),
      Bool(kDistributed, "NEURON_USE_NKI_ALLTOALLV", "true", kTorchNeuronx,
           "Enables native NKI `all_to_all_v`. Set to `0` to use the "
           "compatibility padding fallback. Native mode requires "
           "`aws-neuronx-runtime-lib >= 2.x.62579` and "
           "`aws-neuronx-collectives >= 2.x.63596`."),
      Int(kDistributed, "COLLECTIVE_BUCKETSIZE_IN_MB", "512", 1, kNoMax,
          kTorchNeuronx, "Maximum bucket size (MB) for collective operations."),

      Bool(kAllocatorSection, "TORCH_NEURONX_ENABLE_SCALAR_CACHE", "true",
           kTorchNeuronx,
           "When `1` (the default), caches device-side scalar constants to "
           "avoid repeated host-to-device copies."),
      Var(kAllocatorSection, "TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG",
          Type::kString, Rule::kAnyString, "", kAllocator,
          "Segment-pool tuning knobs of the Neuron caching allocator, as "
          "`key1=value1,key2=value2,...` (kPoolBoundary, kSmallSegmentSize, "
          "kMediumSegmentSize, kMediumThreshold, kSegmentAlignment, "
          "kMinRoundedSize, kRoundupPower2Divisions, kSmallSplitThreshold, "
          "kLargeSplitThreshold, kMaxSplitSizeBytes, "
          "kMaxNonSplitRoundingBytes). Parsed and validated by the allocator "
          "when it creates a device's NeuronSegmentPool; restart the process "
          "to change it."),

      Var(kNeffdSection, "NEFFD_ADDRESS", Type::kString, Rule::kAddress,
          "unix:/run/neffd/neffd.sock", kNeffd,
          "Address of the neffd daemon (unix:PATH or 127.0.0.1:PORT)"),
      Var(kNeffdSection, "NEFFD_ADMIN_ADDRESS", Type::kString, Rule::kAddress,
          "unix:/run/neffd/admin.sock", kNeffd,
          "Address of neffd's admin socket, the only one that serves the "
          "calls that change the cache (evict, gc, import, drain, undrain, "
          "stats -z); neffctl sends those there"),
      Var(kNeffdSection, "NEFFD_REAL_COMPILER", Type::kPath,
          Rule::kAbsolutePath, nullptr, kClient,
          "The real `neuronx-cc` that `neffcc` (the compiler drop-in) runs "
          "on a miss. When unset, the first `neuronx-cc` on `PATH` that is "
          "not `neffcc` itself."),
      Bool(kNeffdSection, "NEFFD_DISABLE", "false", kClient,
           "When `1`, `neffcc` runs the real compiler unchanged, without "
           "the cache."),
      Bool(kNeffdSection, "NEFFD_NO_COMPILE", "false", kClient,
           "When `1`, a cache miss in `neffcc` is an error (exit 75, with "
           "the key and why it missed on stderr) instead of a compile."),
      Bool(kNeffdSection, "NEFFD_EXPLAIN", "false", kClient,
           "When `1`, each cache miss in `neffcc` writes one stderr line "
           "saying whether the same input is cached and which flags, "
           "compiler version or platform target differ."),
      Var(kNeffdSection, "NEFFD_REMOTE", Type::kString, Rule::kAnyString,
          nullptr, kDaemon,
          "The S3 tier behind the shared store, `s3://BUCKET/PREFIX` "
          "(`neffd --remote`); unset: no remote tier."),
      Var(kNeffdSection, "NEFFD_COORDINATOR", Type::kString, Rule::kAnyString,
          nullptr, kDaemon,
          "Cross-host coordination on etcd, `etcd://HOST:PORT[,HOST:PORT...]` "
          "(`neffd --coordinator`): leases and watches instead of lease-file "
          "polling; unset: the shared filesystem's protocol."),
      Var(kNeffdSection, "NEFFD_S3_ENDPOINT", Type::kString, Rule::kAnyString,
          nullptr, kDaemon,
          "S3 endpoint URL for S3-compatible stores (`neffd "
          "--s3_endpoint`); unset: AWS's regional endpoint."),
      Var(kNeffdSection, "NEFFD_REMOTE_MODE", Type::kString, Rule::kAnyString,
          "rw", kDaemon,
          "`rw` (read through and upload) or `ro` (read through only; "
          "`neffd --remote_mode`)."),
      Var(kNeffdSection, "AWS_REGION", Type::kString, Rule::kAnyString, nullptr,
          kDaemon,
          "The S3 tier's signing region (`neffd --s3_region`), as the AWS "
          "SDKs read it."),
      Var(kNeffdSection, "AWS_DEFAULT_REGION", Type::kString, Rule::kAnyString,
          nullptr, kDaemon,
          "The S3 tier's region when `AWS_REGION` is unset; else "
          "`us-east-1`."),
      Var(kNeffdSection, "JOURNAL_STREAM", Type::kString, Rule::kAnyString,
          nullptr, kNeffd,
          "Set by systemd when stderr goes to the journal; neffd then starts "
          "each log line with a `<N>` syslog priority instead of a "
          "timestamp."),
  };
}

const std::vector<VarSpec>& Registry() {
  static const std::vector<VarSpec>* const registry =
      new std::vector<VarSpec>(MakeRegistry());
  return *registry;
}

}  // namespace

absl::Span<const VarSpec> Variables() { return Registry(); }

const VarSpec* FindVariable(absl::string_view name) {
  static const auto* const index = [] {
    auto* map = new absl::flat_hash_map<absl::string_view, const VarSpec*>();
    for (const VarSpec& spec : Registry()) (*map)[spec.name] = &spec;
    return map;
  }();
  auto it = index->find(name);
  return it == index->end() ? nullptr : it->second;
}

const VarSpec* SuggestVariable(absl::string_view name) {
  const VarSpec* best = nullptr;
  int best_distance = 3;
  for (const VarSpec& spec : Registry()) {
    int distance = internal::EditDistance(name, spec.name);
    if (distance < best_distance) {
      best = &spec;
      best_distance = distance;
    }
  }
  return best;
}

absl::string_view TypeName(Type type) {
  switch (type) {
    case Type::kBool:
      return "bool";
    case Type::kInt:
      return "int";
    case Type::kString:
      return "str";
    case Type::kPath:
      return "path";
    case Type::kIntList:
      return "int list";
    case Type::kStringList:
      return "str list";
  }
  return "?";
}

absl::string_view OriginName(Origin origin) {
  switch (origin) {
    case Origin::kDefault:
      return "default";
    case Origin::kEnv:
      return "env";
    case Origin::kDerived:
      return "derived";
    case Origin::kInvalid:
      return "invalid";
  }
  return "?";
}

std::string ReadersText(unsigned readers) {
  static constexpr std::pair<Reader, absl::string_view> kNames[] = {
      {kDaemon, "daemon"},
      {kClient, "client"},
      {kAllocator, "allocator"},
      {kTorchNeuronx, "torch-neuronx"}};
  std::vector<absl::string_view> names;
  for (const auto& [bit, name] : kNames) {
    if (readers & bit) names.push_back(name);
  }
  return absl::StrJoin(names, ", ");
}

std::string ValidationText(const VarSpec& spec) {
  switch (spec.rule) {
    case Rule::kBool:
      return spec.requires_true == nullptr
                 ? "1/0, true/false, yes/no, on/off (any case)"
                 : absl::StrCat(
                       "1/0, true/false, yes/no, on/off (any case); "
                       "false while ",
                       spec.requires_true, " is false");
    case Rule::kBool01:
      return "only 0 or 1";
    case Rule::kOnlyOneOn:
      return "1 enables; any other value disables (never a warning)";
    case Rule::kInt:
      return absl::StrCat("plain decimal integer ",
                          internal::RangeText(spec.min, spec.max));
    case Rule::kIntList:
      return absl::StrCat("comma-separated plain decimal integers ",
                          internal::RangeText(spec.min, spec.max));
    case Rule::kIndexRanges:
      return absl::StrCat("comma-separated indices or ranges A-B (A <= B), ",
                          internal::RangeText(spec.min, spec.max));
    case Rule::kChoices:
      return absl::StrCat("comma-separated subset of ", spec.choices);
    case Rule::kNames:
      return "comma-separated names (letters, digits, _ . -)";
    case Rule::kAnyString:
      return "any string";
    case Rule::kNonEmpty:
      return "non-empty";
    case Rule::kAbsolutePath:
      return "absolute path";
    case Rule::kPlatform:
      return "platform name such as trn2 or trn3";
    case Rule::kAddress:
      return "unix:/absolute/path or HOST:PORT";
  }
  return "?";
}

std::string DefaultText(const VarSpec& spec) {
  if (spec.default_doc != nullptr) return spec.default_doc;
  if (spec.default_value == nullptr) return "(unset)";
  return spec.default_value;
}

}  // namespace neffd::config
