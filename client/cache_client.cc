#include "client/cache_client.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <optional>

#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/backend.h"
#include "client/daemon_backend.h"
#include "client/daemon_channel.h"
#include "client/fs_backend.h"
#include "client/key.h"
#include "client/workdir.h"
#include "store/digest.h"
#include "store/done_record.h"
#include "store/entry_id.h"
#include "store/file_util.h"

namespace neffd {
namespace {

constexpr char kFailurePayload[] = "type.googleapis.com/neffd.v1.Failure";
constexpr char kWorkdirPayload[] = "neffd/workdir";
constexpr int kMaxAttempts = 8;
constexpr absl::Duration kMetricsInterval = absl::Seconds(1);

std::string HostName() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  return host;
}

// The last few lines of a log, for a one-paragraph error message.
std::string LogExcerpt(const std::string& log) {
  std::vector<absl::string_view> lines =
      absl::StrSplit(log, '\n', absl::SkipWhitespace());
  const size_t first = lines.size() > 5 ? lines.size() - 5 : 0;
  std::string out;
  for (size_t i = first; i < lines.size(); ++i) {
    absl::StrAppend(&out, out.empty() ? "" : " | ", lines[i].substr(0, 300));
  }
  return out.empty() ? "(no compiler log)" : out;
}

absl::Status CompileFailedStatus(const EntryKey& id, const v1::Failure& failure,
                                 const std::string& workdir) {
  std::string message = absl::StrCat("compile of ", id.Canonical(), " failed");
  if (failure.retry_after_unix_ms() > 0) {
    absl::StrAppend(
        &message, " (recorded; retried after ",
        absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                         absl::FromUnixMillis(failure.retry_after_unix_ms()),
                         absl::UTCTimeZone()),
        ")");
  }
  if (!workdir.empty()) {
    absl::StrAppend(&message, "; artifacts kept in ", workdir);
  }
  absl::StrAppend(&message, ": ", LogExcerpt(failure.log()));
  absl::Status status = absl::AbortedError(message);
  status.SetPayload(kFailurePayload, absl::Cord(failure.SerializeAsString()));
  if (!workdir.empty()) status.SetPayload(kWorkdirPayload, absl::Cord(workdir));
  return status;
}

CacheResult FromEntry(const v1::Entry& entry, CacheResult::Source source,
                      bool fallback) {
  return CacheResult{entry.path(), entry.size(), entry.sha256(), source,
                     fallback};
}

// The caller's metadata plus, when this call compiled, how long it took.
PublishMetadata WithCompileTime(
    const PublishMetadata& metadata,
    const std::optional<absl::Duration>& compile_time) {
  PublishMetadata out = metadata;
  if (compile_time.has_value()) {
    out[kCompileMsMetadata] =
        absl::StrCat(absl::ToInt64Milliseconds(*compile_time));
  }
  return out;
}

// A published output goes with its work directory unless the artifacts are
// preserved: the daemon may take the file itself, not a copy of it.
Lease::FileAfterPublish OutputAfterPublish(const CacheClientOptions& options) {
  return options.preserve_artifacts ? Lease::FileAfterPublish::kKept
                                    : Lease::FileAfterPublish::kMayBeTaken;
}

}  // namespace

CompileResult CompileResult::FromWaitStatus(int wait_status, std::string log) {
  if (WIFEXITED(wait_status)) {
    return WEXITSTATUS(wait_status) == 0 ? Ok() : CompilerError(std::move(log));
  }
  if (WIFSIGNALED(wait_status)) {
    return Cancelled(absl::StrCat("the compiler was killed by signal ",
                                  WTERMSIG(wait_status)));
  }
  return Cancelled("the compiler did not exit");
}

bool IsCompileFailure(const absl::Status& status) {
  return status.GetPayload(kFailurePayload).has_value();
}

std::optional<CompileFailure> GetCompileFailure(const absl::Status& status) {
  absl::optional<absl::Cord> payload = status.GetPayload(kFailurePayload);
  if (!payload.has_value()) return std::nullopt;
  v1::Failure failure;
  failure.ParseFromString(std::string(*payload));
  CompileFailure out;
  out.log = failure.log();
  if (failure.retry_after_unix_ms() > 0) {
    out.retry_after = absl::FromUnixMillis(failure.retry_after_unix_ms());
  }
  if (absl::optional<absl::Cord> workdir = status.GetPayload(kWorkdirPayload)) {
    out.workdir = std::string(*workdir);
  }
  return out;
}

CacheClientOptions CacheClientOptions::FromEnv(const config::EnvSnapshot& env) {
  CacheClientOptions o;
  o.address = env.GetString("NEFFD_ADDRESS");
  o.neff_cache_dir = env.GetString("TORCH_NEURONX_NEFF_CACHE_DIR");
  o.hlo_cache_dir = env.GetString("TORCH_NEURONX_HLO_CACHE_DIR");
  o.local_dir = env.GetString("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR");
  o.debug_dir = env.GetString("TORCH_NEURONX_DEBUG_DIR");
  o.neff_cache_disabled = env.GetBool("TORCH_NEURONX_NEFF_DISABLE_CACHE");
  o.hlo_cache_enabled = env.GetBool("TORCH_NEURONX_HLO_CACHE");
  o.key_from_hlo = env.GetBool("TORCH_NEURONX_NEFF_KEY_FROM_HLO");
  o.preserve_artifacts =
      env.GetBool("TORCH_NEURONX_PRESERVE_COMPILATION_ARTIFACTS");
  o.compile_only = env.GetBool("TORCH_NEURONX_COMPILE_ONLY");
  o.platform_target = env.GetString("NEURON_PLATFORM_TARGET_OVERRIDE");
  o.lock_timeout =
      absl::Seconds(env.GetInt("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"));
  o.metric_tables = env.GetStringList("TORCH_NEURONX_ENABLED_METRIC_TABLES");
  o.metrics_dir = env.GetString("TORCH_NEURONX_METRICS_DIR");
  o.rank = env.GetInt("RANK");
  return o;
}

struct CacheClient::Call {
  const EntryKey id;
  const CompileFn& compile_fn;
  const PublishMetadata& metadata;
  bool fallback = false;  // the daemon failed during this call
  bool counted_fallback = false;
  // Set when this call compiled; recorded in the done record so gc can
  // remove cheap entries first. Unknown for adopted outputs.
  std::optional<absl::Duration> compile_time;
};

std::unique_ptr<CacheClient> CacheClient::FromEnvironment(
    const std::string& address) {
  return *FromEnvironment(address, ClientTls());
}

absl::StatusOr<std::unique_ptr<CacheClient>> CacheClient::FromEnvironment(
    const std::string& address, const ClientTls& tls) {
  if (absl::Status s = CheckTlsFiles(tls); !s.ok()) return s;
  const config::EnvSnapshot env = config::EnvSnapshot::FromProcessEnvironment();
  for (const std::string& warning : env.warnings()) {
    std::fprintf(stderr, "neffd client: warning: %s\n", warning.c_str());
  }
  CacheClientOptions options = CacheClientOptions::FromEnv(env);
  if (!address.empty()) options.address = address;
  options.tls = tls;
  return std::make_unique<CacheClient>(std::move(options));
}

CacheClient::CacheClient(CacheClientOptions options)
    : options_([&] {
        if (options.host.empty()) options.host = HostName();
        if (!options.warn) {
          options.warn = [](const std::string& m) {
            std::fprintf(stderr, "neffd client: warning: %s\n", m.c_str());
          };
        }
        return std::move(options);
      }()),
      metrics_(options_.metric_tables, options_.metrics_dir, options_.rank) {
  FilesystemBackendOptions fs;
  fs.neff_cache_dir = options_.neff_cache_dir;
  fs.hlo_cache_dir = options_.hlo_cache_dir;
  fs.local_dir = options_.local_dir;
  fs.host = options_.host;
  fs.failed_ttl = options_.failed_ttl;
  fs.env = options_.env;
  filesystem_ = std::make_unique<FilesystemBackend>(std::move(fs));
}

CacheClient::~CacheClient() { (void)WriteMetrics(); }

Backend& CacheClient::Daemon() {
  absl::MutexLock lock(&mu_);
  if (daemon_ == nullptr) {  // connect lazily: the first call pays for it
    DaemonBackendOptions o;
    o.address = ResolveDaemonAddress(options_.address);
    o.host = options_.host;
    o.rank = options_.rank;
    o.env = options_.env;
    absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> credentials =
        CredentialsFor(options_.tls);
    if (!credentials.ok()) {
      // The daemon will refuse a plaintext TCP call: the rank falls back to
      // the filesystem, and says why.
      Warn(absl::StrCat(credentials.status().message(),
                        "; connecting without TLS"));
    }
    daemon_ = std::make_unique<DaemonBackend>(
        o,
        ConnectToDaemon(o.address, credentials.ok() ? *credentials : nullptr));
  }
  return *daemon_;
}

void CacheClient::Warn(const std::string& message) { options_.warn(message); }

void CacheClient::WarnOncePerProcess(const std::string& message) {
  static std::atomic<bool> warned{false};
  if (!warned.exchange(true)) Warn(message);
}

void CacheClient::Count(const std::function<void(CacheCounters&)>& update) {
  absl::MutexLock lock(&mu_);
  update(counters_);
}

CacheCounters CacheClient::counters() const {
  absl::MutexLock lock(&mu_);
  return counters_;
}

void CacheClient::SetAllocatorStats(StatsSource source) {
  absl::MutexLock lock(&mu_);
  allocator_stats_ = std::move(source);
}

absl::Status CacheClient::WriteMetrics() {
  if (!metrics_.neff_cache_enabled() && !metrics_.allocator_enabled()) {
    return absl::OkStatus();
  }
  CacheCounters counters;
  StatsSource allocator;
  {
    absl::MutexLock lock(&mu_);
    counters = counters_;
    allocator = allocator_stats_;
    last_metrics_ = options_.env->Now();
  }
  return metrics_.Write(counters, allocator);
}

void CacheClient::MaybeWriteMetrics() {
  {
    absl::MutexLock lock(&mu_);
    if (options_.env->Now() - last_metrics_ < kMetricsInterval) return;
  }
  if (absl::Status s = WriteMetrics(); !s.ok()) {
    Warn(absl::StrCat("writing metrics: ", s.message()));
  }
}

bool CacheClient::CacheEnabled(const EntryKey& id) const {
  return id.ns() == Namespace::kNeff ? !options_.neff_cache_disabled
                                     : options_.hlo_cache_enabled;
}

absl::StatusOr<std::string> CacheClient::DeriveKey(
    absl::string_view hlo_bytes, absl::string_view compiler_flags,
    absl::string_view compiler_version, absl::string_view platform_target,
    absl::string_view base_key) const {
  if (platform_target.empty()) platform_target = options_.platform_target;
  if (platform_target.empty() && options_.compile_only) {
    return absl::InvalidArgumentError(
        "platform_target: unknown; TORCH_NEURONX_COMPILE_ONLY=1 on a host "
        "without a Trainium device needs NEURON_PLATFORM_TARGET_OVERRIDE "
        "(e.g. trn2)");
  }
  return neffd::DeriveKey(KeyInputs{hlo_bytes, base_key, compiler_flags,
                                    compiler_version, platform_target},
                          options_.key_from_hlo);
}

absl::Status CacheClient::OnBackend(
    bool& fallback, bool& counted_fallback,
    const std::function<absl::Status(Backend&)>& op) {
  if (options_.use_daemon && !fallback) {
    absl::Status answer = op(Daemon());
    if (answer.ok() || absl::IsInvalidArgument(answer)) return answer;
    WarnOncePerProcess(absl::StrCat(
        answer.message(),
        "; using the cache directories directly (fallback mode) until the "
        "daemon answers again"));
    fallback = true;
  }
  if (!counted_fallback) {
    counted_fallback = true;
    Count([](CacheCounters& c) { ++c.fallbacks; });
  }
  return op(*filesystem_);
}

template <typename T>
absl::StatusOr<T> CacheClient::WithFallback(
    Call& call, const std::function<absl::StatusOr<T>(Backend&)>& op) {
  absl::StatusOr<T> answer = absl::UnknownError("no backend answered");
  (void)OnBackend(call.fallback, call.counted_fallback, [&](Backend& b) {
    answer = op(b);
    return answer.status();
  });
  return answer;
}

absl::StatusOr<v1::LookupResponse> CacheClient::LookupEntry(Call& call) {
  return WithFallback<v1::LookupResponse>(
      call, [&](Backend& b) { return b.Lookup(call.id); });
}

absl::StatusOr<CacheResult> CacheClient::GetOrCompile(
    absl::string_view ns, absl::string_view compiler_version,
    absl::string_view key, const CompileFn& compile_fn,
    const PublishMetadata& metadata) {
  absl::StatusOr<EntryKey> id = EntryKey::Parse(ns, compiler_version, key);
  if (!id.ok()) return id.status();
  Count([](CacheCounters& c) { ++c.lookups; });
  Call call{*id,   compile_fn,  metadata, !options_.use_daemon,
            false, std::nullopt};
  absl::StatusOr<CacheResult> result;
  if (!CacheEnabled(*id)) {
    result = CompileUncached(call, "");
  } else {
    absl::StatusOr<std::optional<CacheResult>> done = std::nullopt;
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
      done = Attempt(call);
      if (!done.ok() || done->has_value()) break;
    }
    if (!done.ok()) {
      result = done.status();
    } else if (done->has_value()) {
      result = **done;
    } else {
      result = CompileUncached(
          call, absl::StrCat("lost the lock on ", id->Canonical(), " ",
                             kMaxAttempts, " times"));
    }
  }
  MaybeWriteMetrics();
  return result;
}

absl::StatusOr<std::optional<CacheResult>> CacheClient::Lookup(
    absl::string_view ns, absl::string_view compiler_version,
    absl::string_view key) {
  absl::StatusOr<EntryKey> id = EntryKey::Parse(ns, compiler_version, key);
  if (!id.ok()) return id.status();
  if (!CacheEnabled(*id)) return std::nullopt;
  Count([](CacheCounters& c) { ++c.lookups; });
  const CompileFn none;
  const PublishMetadata no_metadata;
  Call call{*id, none, no_metadata, !options_.use_daemon, false, std::nullopt};
  absl::StatusOr<v1::LookupResponse> found = LookupEntry(call);
  if (!found.ok()) return found.status();
  switch (found->result()) {
    case v1::LookupResponse::HIT:
      Count([](CacheCounters& c) { ++c.hits; });
      return FromEntry(found->entry(), CacheResult::Source::kHit,
                       call.fallback);
    case v1::LookupResponse::FAILED:
      return CompileFailedStatus(call.id, found->failure(), "");
    default:
      return std::nullopt;
  }
}

absl::StatusOr<std::optional<CacheResult>> CacheClient::Attempt(Call& call) {
  // A cache that cannot be used at all must not fail the training step.
  auto unusable =
      [&](const absl::Status& s) -> absl::StatusOr<std::optional<CacheResult>> {
    if (absl::IsInvalidArgument(s)) return s;
    absl::StatusOr<CacheResult> own = CompileUncached(
        call, absl::StrCat("the cache cannot be used: ", s.message()));
    if (!own.ok()) return own.status();
    return *own;
  };
  // The lookup and the lock are one call: one round trip fewer on a miss,
  // and in an SPMD step the rank that compiles is not queued behind the
  // other ranks' lookups.
  const absl::Time start = options_.env->Now();
  absl::StatusOr<LockAnswer> answer =
      WithFallback<LockAnswer>(call, [&](Backend& b) {
        return b.LookupOrLock(call.id, options_.lock_timeout);
      });
  if (!answer.ok()) return unusable(answer.status());
  if (answer->at_once && answer->outcome == v1::LockResponse::READY) {
    Count([](CacheCounters& c) { ++c.hits; });
    return FromEntry(answer->entry, CacheResult::Source::kHit, call.fallback);
  }
  if (!answer->at_once) {
    const double waited = absl::ToDoubleSeconds(options_.env->Now() - start);
    Count([&](CacheCounters& c) { c.wait_seconds += waited; });
  }
  switch (answer->outcome) {
    case v1::LockResponse::GRANTED:
      return CompileUnderLease(call, std::move(answer->lease));
    case v1::LockResponse::READY:
      Count([](CacheCounters& c) { ++c.waits; });
      return FromEntry(answer->entry, CacheResult::Source::kWaited,
                       call.fallback);
    case v1::LockResponse::FAILED:
      Count([](CacheCounters& c) { ++c.failures; });
      return CompileFailedStatus(call.id, answer->failure, "");
    default: {  // TIMED_OUT, BUSY
      Count([](CacheCounters& c) { ++c.lock_timeouts; });
      Warn(absl::StrCat("waited ", absl::FormatDuration(options_.lock_timeout),
                        " (TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT) for the "
                        "compile lock on ",
                        call.id.Canonical(), "; compiling it here"));
      absl::StatusOr<CacheResult> own = CompileThenTryPublish(call);
      if (!own.ok()) return own.status();
      return *own;
    }
  }
}

absl::StatusOr<CopyResult> CacheClient::RunCompile(Call& call, WorkDir& dir,
                                                   Lease* lease) {
  const EntryKey& id = call.id;
  CompileJob job{std::string(NamespaceName(id.ns())), id.compiler_version(),
                 id.key(), dir.path(), dir.output_path()};
  const absl::Time start = options_.env->Now();
  CompileResult result = call.compile_fn(job);
  call.compile_time = options_.env->Now() - start;
  const double seconds = absl::ToDoubleSeconds(*call.compile_time);
  Count([&](CacheCounters& c) {
    ++c.compiles;
    c.compile_seconds += seconds;
  });
  switch (result.kind) {
    case CompileResult::Kind::kOk:
      return dir.Output();
    case CompileResult::Kind::kCompilerError: {
      if (result.log.empty()) {
        result.log = dir.CompilerLogTail();
      }
      v1::Failure failure;
      failure.set_log(result.log);
      if (lease != nullptr) {
        absl::StatusOr<v1::Failure> recorded = lease->Fail(result.log);
        if (recorded.ok()) {
          failure = *recorded;
        } else {
          Warn(absl::StrCat("could not record the failure of ", id.Canonical(),
                            ": ", recorded.status().message()));
        }
      }
      Count([](CacheCounters& c) { ++c.failures; });
      return CompileFailedStatus(id, failure, dir.path());
    }
    case CompileResult::Kind::kCancelled:
      break;
  }
  return absl::CancelledError(absl::StrCat(
      "compile of ", id.Canonical(), " was cancelled (", result.log,
      "); nothing was recorded; artifacts kept in ", dir.path()));
}

absl::StatusOr<CopyResult> CacheClient::AdoptOrCompile(Call& call, WorkDir& dir,
                                                       Lease* lease) {
  // A whole output left by a holder that could not publish is adopted.
  if (std::optional<CopyResult> left = dir.CompleteOutput(call.id)) {
    return *left;
  }
  if (absl::Status s = dir.Clear(); !s.ok()) return s;
  return RunCompile(call, dir, lease);
}

CacheResult CacheClient::Finish(Call&, WorkDir& dir,
                                const CacheResult& result) {
  dir.Unmark();
  if (!options_.preserve_artifacts) dir.Remove();
  return result;
}

CacheResult CacheClient::Uncached(Call& call, WorkDir& dir,
                                  const CopyResult& content) {
  dir.Unmark();
  Count([](CacheCounters& c) { ++c.uncached; });
  // No daemon hashed these bytes (the marker only fingerprints them).
  absl::StatusOr<CopyResult> hashed = HashFile(dir.output_path());
  return CacheResult{dir.output_path(), content.size,
                     hashed.ok() ? hashed->sha256 : content.sha256,
                     CacheResult::Source::kUncached, call.fallback};
}

absl::StatusOr<std::optional<CacheResult>> CacheClient::CompileUnderLease(
    Call& call, std::unique_ptr<Lease> lease) {
  absl::StatusOr<WorkDir> dir =
      WorkDir::Claim(options_.debug_dir, call.id,
                     options_.env->Now() + options_.lock_timeout, options_.env);
  if (!dir.ok()) {
    lease.reset();  // abandoned: let the next waiter try
    if (!absl::IsDeadlineExceeded(dir.status())) return dir.status();
    Count([](CacheCounters& c) { ++c.lock_timeouts; });
    Warn(absl::StrCat(dir.status().message(), "; compiling it here"));
    absl::StatusOr<CacheResult> own = CompileThenTryPublish(call);
    if (!own.ok()) return own.status();
    return *own;
  }
  // Whoever had the directory may have published the entry meanwhile (a
  // lease that outlived its daemon, adopted by another rank). A directory
  // this claim created had nobody (the grant checked the store).
  if (dir->inherited()) {
    absl::StatusOr<v1::LookupResponse> found = LookupEntry(call);
    if (found.ok() && found->result() == v1::LookupResponse::HIT) {
      Count([](CacheCounters& c) { ++c.waits; });
      return FromEntry(found->entry(), CacheResult::Source::kWaited,
                       call.fallback);
    }
  }
  absl::StatusOr<CopyResult> content = AdoptOrCompile(call, *dir, lease.get());
  if (!content.ok()) return content.status();
  absl::StatusOr<v1::Entry> entry =
      lease->Publish(dir->output_path(), *content,
                     WithCompileTime(call.metadata, call.compile_time),
                     OutputAfterPublish(options_));
  if (entry.ok()) {
    return Finish(
        call, *dir,
        FromEntry(*entry, CacheResult::Source::kCompiled, call.fallback));
  }
  if (absl::IsFailedPrecondition(entry.status()) ||
      absl::IsUnavailable(entry.status())) {
    // The lease is gone (revoked, or its daemon died). The output stays in
    // the working directory, marked whole, for the next holder.
    (void)dir->MarkComplete(call.id);
    return std::nullopt;
  }
  Warn(absl::StrCat("publishing ", call.id.Canonical(), ": ",
                    entry.status().message(), "; using ", dir->output_path(),
                    " uncached"));
  return Uncached(call, *dir, *content);
}

absl::StatusOr<CacheResult> CacheClient::CompileThenTryPublish(Call& call) {
  absl::StatusOr<WorkDir> dir = WorkDir::Private(options_.debug_dir, call.id);
  if (!dir.ok()) return dir.status();
  absl::StatusOr<CopyResult> content = RunCompile(call, *dir, nullptr);
  if (!content.ok()) return content.status();
  // Publish only if that needs no waiting.
  absl::StatusOr<LockAnswer> answer = WithFallback<LockAnswer>(
      call, [&](Backend& b) { return b.Lock(call.id, absl::ZeroDuration()); });
  if (answer.ok() && answer->outcome == v1::LockResponse::READY) {
    return Finish(
        call, *dir,
        FromEntry(answer->entry, CacheResult::Source::kWaited, call.fallback));
  }
  if (answer.ok() && answer->outcome == v1::LockResponse::GRANTED) {
    absl::StatusOr<v1::Entry> entry = answer->lease->Publish(
        dir->output_path(), *content,
        WithCompileTime(call.metadata, call.compile_time),
        OutputAfterPublish(options_));
    if (entry.ok()) {
      return Finish(
          call, *dir,
          FromEntry(*entry, CacheResult::Source::kCompiled, call.fallback));
    }
  }
  return Uncached(call, *dir, *content);
}

absl::StatusOr<CacheResult> CacheClient::CompileUncached(
    Call& call, const std::string& why) {
  if (!why.empty()) {
    Warn(absl::StrCat(why, "; compiling ", call.id.Canonical(),
                      " without the cache"));
  }
  absl::StatusOr<WorkDir> dir = WorkDir::Private(options_.debug_dir, call.id);
  if (!dir.ok()) return dir.status();
  absl::StatusOr<CopyResult> content = RunCompile(call, *dir, nullptr);
  if (!content.ok()) return content.status();
  return Uncached(call, *dir, *content);
}

}  // namespace neffd
