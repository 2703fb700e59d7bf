// The C ABI (client/neffclient.h) over CacheClient.
#include "client/neffclient.h"

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "allocator/memory_stats.h"
#include "allocator/segment_pool.h"
#include "allocator/segment_provider.h"
#include "client/cache_client.h"
#include "client/torchneuron_cache.h"
#include "client/torchneuron_key.h"

struct neff_client {
  std::unique_ptr<neffd::CacheClient> impl;
};

struct neff_torchneuron_cache {
  std::unique_ptr<neffd::TorchNeuronCache> impl;
};

struct neff_torchneuron_lock {
  std::unique_ptr<neffd::TorchNeuronCompileLock> impl;
};

// A NeuronSegmentPool over its own provider.
struct neff_pool {
  explicit neff_pool(size_t capacity) : provider(capacity) {}
  neffd::allocator::HostMemoryProvider provider;
  std::unique_ptr<neffd::allocator::NeuronSegmentPool> impl;
};

namespace {

thread_local std::string last_error;
thread_local neffd::CompileFailure last_failure;

// What a C compile callback reported, beyond its return code.
struct JobState {
  std::string log;
};

neff_status Fail(neff_status status, const absl::Status& why) {
  last_error = std::string(why.message());
  return status;
}

neff_status FromStatus(const absl::Status& status) {
  if (status.ok()) return NEFF_OK;
  last_failure =
      neffd::GetCompileFailure(status).value_or(neffd::CompileFailure{});
  if (absl::IsInvalidArgument(status)) {
    return Fail(NEFF_INVALID_ARGUMENT, status);
  }
  if (neffd::IsCompileFailure(status)) return Fail(NEFF_COMPILE_FAILED, status);
  // A lock wait that ran out (TorchNeuronCache::AcquireLock).
  if (absl::IsDeadlineExceeded(status)) return Fail(NEFF_LOCK_TIMEOUT, status);
  if (absl::IsCancelled(status)) return Fail(NEFF_CANCELLED, status);
  return Fail(NEFF_ERROR, status);
}

char* Dup(const std::string& s) {
  char* out = static_cast<char*>(std::malloc(s.size() + 1));
  if (out != nullptr) std::memcpy(out, s.c_str(), s.size() + 1);
  return out;
}

const char* OrEmpty(const char* s) { return s != nullptr ? s : ""; }

bool Missing(const void* p, const char* what, neff_status* status) {
  if (p != nullptr) return false;
  *status = Fail(NEFF_INVALID_ARGUMENT,
                 absl::InvalidArgumentError(std::string(what) + ": is NULL"));
  return true;
}

neff_status NewPool(size_t capacity, neff_pool** out) {
  auto pool = std::make_unique<neff_pool>(capacity);
  absl::StatusOr<std::unique_ptr<neffd::allocator::NeuronSegmentPool>> made =
      neffd::allocator::NeuronSegmentPool::CreateFromEnvironment(
          &pool->provider);
  if (!made.ok()) return FromStatus(made.status());
  pool->impl = *std::move(made);
  *out = pool.release();
  return NEFF_OK;
}

// The process's pool (or why it could not be made); never destroyed.
const absl::StatusOr<neff_pool*>& DefaultPool() {
  static const auto* pool = [] {
    neff_pool* made = nullptr;
    const neff_status status =
        NewPool(neffd::allocator::HostMemoryProvider::kUnlimited, &made);
    return new absl::StatusOr<neff_pool*>(
        status == NEFF_OK ? absl::StatusOr<neff_pool*>(made)
                          : absl::InvalidArgumentError(last_error));
  }();
  return *pool;
}

std::vector<std::pair<std::string, int64_t>> PoolStats(const neff_pool* pool) {
  return neffd::allocator::MemoryStatsToDict(pool->impl->GetStats());
}

}  // namespace

extern "C" {

void neff_compile_set_log(const neff_compile_job* job, const char* log) {
  if (job != nullptr && job->internal != nullptr) {
    static_cast<JobState*>(job->internal)->log = OrEmpty(log);
  }
}

neff_status neff_client_new(const char* address, neff_client** out) {
  return neff_client_new_tls(address, nullptr, nullptr, nullptr, out);
}

neff_status neff_client_new_tls(const char* address, const char* tls_ca,
                                const char* tls_cert, const char* tls_key,
                                neff_client** out) {
  neff_status status;
  if (Missing(out, "out", &status)) return status;
  *out = nullptr;
  neffd::ClientTls tls;
  tls.ca = OrEmpty(tls_ca);
  tls.cert = OrEmpty(tls_cert);
  tls.key = OrEmpty(tls_key);
  absl::StatusOr<std::unique_ptr<neffd::CacheClient>> client =
      neffd::CacheClient::FromEnvironment(OrEmpty(address), tls);
  if (!client.ok()) return FromStatus(client.status());
  *out = new neff_client{*std::move(client)};
  // As the Python module: the allocator table reports the default pool
  // until neff_client_attach_pool names another.
  (*out)->impl->SetAllocatorStats([] {
    const absl::StatusOr<neff_pool*>& pool = DefaultPool();
    return pool.ok() ? PoolStats(*pool)
                     : std::vector<std::pair<std::string, int64_t>>();
  });
  return NEFF_OK;
}

void neff_client_free(neff_client* client) { delete client; }

neff_status neff_derive_key(const neff_client* client, const void* hlo_bytes,
                            size_t hlo_size, const char* compiler_flags,
                            const char* compiler_version,
                            const char* platform_target, const char* base_key,
                            char* key_out) {
  neff_status status;
  if (Missing(client, "client", &status) ||
      Missing(key_out, "key_out", &status)) {
    return status;
  }
  absl::StatusOr<std::string> key = client->impl->DeriveKey(
      absl::string_view(static_cast<const char*>(hlo_bytes),
                        hlo_bytes != nullptr ? hlo_size : 0),
      OrEmpty(compiler_flags), OrEmpty(compiler_version),
      OrEmpty(platform_target), OrEmpty(base_key));
  if (!key.ok()) return FromStatus(key.status());
  std::snprintf(key_out, NEFF_KEY_SIZE, "%s", key->c_str());
  return NEFF_OK;
}

neff_status neff_torchneuron_key(const void* base_key, size_t base_key_size,
                                 const void* ir_bytes, size_t ir_size,
                                 char* key_out) {
  neff_status status;
  if (Missing(key_out, "key_out", &status) ||
      (base_key_size > 0 && Missing(base_key, "base_key", &status)) ||
      (ir_size > 0 && Missing(ir_bytes, "ir_bytes", &status))) {
    return status;
  }
  const std::string key = neffd::TorchNeuronKey(
      absl::string_view(static_cast<const char*>(base_key), base_key_size),
      absl::string_view(static_cast<const char*>(ir_bytes), ir_size));
  std::snprintf(key_out, NEFF_TORCHNEURON_KEY_SIZE, "%s", key.c_str());
  return NEFF_OK;
}

neff_status neff_lookup(neff_client* client, const char* ns,
                        const char* compiler_version, const char* key,
                        char** path_out) {
  neff_status status;
  if (Missing(client, "client", &status) ||
      Missing(path_out, "path_out", &status)) {
    return status;
  }
  *path_out = nullptr;
  absl::StatusOr<std::optional<neffd::CacheResult>> found =
      client->impl->Lookup(OrEmpty(ns), OrEmpty(compiler_version),
                           OrEmpty(key));
  if (!found.ok()) return FromStatus(found.status());
  if (!found->has_value()) return NEFF_MISS;
  *path_out = Dup((*found)->path);
  return NEFF_OK;
}

neff_status neff_get_or_compile(neff_client* client, const char* ns,
                                const char* compiler_version, const char* key,
                                neff_compile_fn compile, void* user_data,
                                char** path_out) {
  neff_status status;
  if (Missing(client, "client", &status) ||
      Missing(reinterpret_cast<const void*>(compile), "compile", &status) ||
      Missing(path_out, "path_out", &status)) {
    return status;
  }
  *path_out = nullptr;
  neffd::CompileFn fn = [&](const neffd::CompileJob& job) {
    JobState state;
    neff_compile_job c_job{
        job.ns.c_str(),      job.compiler_version.c_str(), job.key.c_str(),
        job.workdir.c_str(), job.output_path.c_str(),      &state};
    switch (compile(user_data, &c_job)) {
      case NEFF_COMPILE_OK:
        return neffd::CompileResult::Ok();
      case NEFF_COMPILE_ERROR:
        return neffd::CompileResult::CompilerError(state.log);
      default:
        return neffd::CompileResult::Cancelled(
            state.log.empty() ? "cancelled by the compile callback"
                              : state.log);
    }
  };
  absl::StatusOr<neffd::CacheResult> result = client->impl->GetOrCompile(
      OrEmpty(ns), OrEmpty(compiler_version), OrEmpty(key), fn);
  if (!result.ok()) return FromStatus(result.status());
  *path_out = Dup(result->path);
  return NEFF_OK;
}

const char* neff_last_error(void) { return last_error.c_str(); }

const char* neff_last_failure_log(void) { return last_failure.log.c_str(); }

int64_t neff_last_failure_retry_after_ms(void) {
  return last_failure.retry_after == absl::InfinitePast()
             ? 0
             : absl::ToUnixMillis(last_failure.retry_after);
}

const char* neff_last_failure_workdir(void) {
  return last_failure.workdir.c_str();
}

neff_status neff_client_counters(const neff_client* client,
                                 neff_counters* out) {
  neff_status status;
  if (Missing(client, "client", &status) || Missing(out, "out", &status)) {
    return status;
  }
  const neffd::CacheCounters c = client->impl->counters();
  *out = neff_counters{
      c.lookups,         c.hits,      c.waits,    c.wait_seconds,  c.compiles,
      c.compile_seconds, c.fallbacks, c.failures, c.lock_timeouts, c.uncached};
  return NEFF_OK;
}

neff_status neff_client_write_metrics(neff_client* client) {
  neff_status status;
  if (Missing(client, "client", &status)) return status;
  return FromStatus(client->impl->WriteMetrics());
}

neff_status neff_pool_new(size_t capacity_bytes, neff_pool** out) {
  neff_status status;
  if (Missing(out, "out", &status)) return status;
  *out = nullptr;
  return NewPool(capacity_bytes == 0
                     ? neffd::allocator::HostMemoryProvider::kUnlimited
                     : capacity_bytes,
                 out);
}

neff_status neff_default_pool(neff_pool** out) {
  neff_status status;
  if (Missing(out, "out", &status)) return status;
  const absl::StatusOr<neff_pool*>& pool = DefaultPool();
  if (!pool.ok()) return FromStatus(pool.status());
  *out = *pool;
  return NEFF_OK;
}

void neff_pool_free(neff_pool* pool) {
  const absl::StatusOr<neff_pool*>& default_pool = DefaultPool();
  if (default_pool.ok() && *default_pool == pool) return;
  delete pool;
}

neff_status neff_pool_allocate(neff_pool* pool, size_t bytes, void** out) {
  neff_status status;
  if (Missing(pool, "pool", &status) || Missing(out, "out", &status)) {
    return status;
  }
  absl::StatusOr<neffd::allocator::Allocation> a = pool->impl->Allocate(bytes);
  if (!a.ok()) return FromStatus(a.status());
  *out = a->ptr;
  return NEFF_OK;
}

neff_status neff_pool_release(neff_pool* pool, void* ptr) {
  neff_status status;
  if (Missing(pool, "pool", &status)) return status;
  return FromStatus(pool->impl->Free(ptr));
}

neff_status neff_pool_empty_cache(neff_pool* pool, size_t* released_bytes) {
  neff_status status;
  if (Missing(pool, "pool", &status)) return status;
  const size_t released = pool->impl->EmptyCache();
  if (released_bytes != nullptr) *released_bytes = released;
  return NEFF_OK;
}

neff_status neff_pool_memory_stats(const neff_pool* pool, char** text_out) {
  neff_status status;
  if (Missing(pool, "pool", &status) ||
      Missing(text_out, "text_out", &status)) {
    return status;
  }
  std::string text;
  for (const auto& [name, value] : PoolStats(pool)) {
    text += name + " " + std::to_string(value) + "\n";
  }
  *text_out = Dup(text);
  return NEFF_OK;
}

void neff_pool_reset_peak_memory_stats(neff_pool* pool) {
  if (pool != nullptr) pool->impl->ResetPeakStats();
}

void neff_client_attach_pool(neff_client* client, neff_pool* pool) {
  if (client == nullptr || pool == nullptr) return;
  client->impl->SetAllocatorStats([pool] { return PoolStats(pool); });
}

neff_status neff_torchneuron_cache_new(const char* address,
                                       const char* compiler_version,
                                       neff_torchneuron_cache** out) {
  neff_status status;
  if (Missing(out, "out", &status) ||
      Missing(compiler_version, "compiler_version", &status)) {
    return status;
  }
  *out = nullptr;
  absl::StatusOr<std::unique_ptr<neffd::TorchNeuronCache>> cache =
      neffd::TorchNeuronCache::FromEnvironment(compiler_version,
                                               OrEmpty(address));
  if (!cache.ok()) return FromStatus(cache.status());
  *out = new neff_torchneuron_cache{*std::move(cache)};
  return NEFF_OK;
}

void neff_torchneuron_cache_free(neff_torchneuron_cache* cache) {
  delete cache;
}

neff_status neff_torchneuron_cache_exists(neff_torchneuron_cache* cache,
                                          const char* key) {
  neff_status status;
  if (Missing(cache, "cache", &status)) return status;
  absl::StatusOr<bool> found = cache->impl->Exists(OrEmpty(key));
  if (!found.ok()) return FromStatus(found.status());
  return *found ? NEFF_OK : NEFF_MISS;
}

neff_status neff_torchneuron_cache_get(neff_torchneuron_cache* cache,
                                       const char* key, void** data_out,
                                       size_t* size_out) {
  neff_status status;
  if (Missing(cache, "cache", &status) ||
      Missing(data_out, "data_out", &status) ||
      Missing(size_out, "size_out", &status)) {
    return status;
  }
  *data_out = nullptr;
  *size_out = 0;
  absl::StatusOr<std::string> bytes = cache->impl->Get(OrEmpty(key));
  if (absl::IsNotFound(bytes.status())) return NEFF_MISS;
  if (!bytes.ok()) return FromStatus(bytes.status());
  void* data = std::malloc(bytes->size());
  if (data == nullptr) {
    return Fail(NEFF_ERROR, absl::ResourceExhaustedError("out of memory"));
  }
  std::memcpy(data, bytes->data(), bytes->size());
  *data_out = data;
  *size_out = bytes->size();
  return NEFF_OK;
}

neff_status neff_torchneuron_cache_put(neff_torchneuron_cache* cache,
                                       const char* key, const void* data,
                                       size_t size) {
  neff_status status;
  if (Missing(cache, "cache", &status) || Missing(data, "data", &status)) {
    return status;
  }
  return FromStatus(cache->impl->Put(
      OrEmpty(key), absl::string_view(static_cast<const char*>(data), size)));
}

neff_status neff_torchneuron_cache_remove(neff_torchneuron_cache* cache,
                                          const char* key) {
  neff_status status;
  if (Missing(cache, "cache", &status)) return status;
  return FromStatus(cache->impl->Remove(OrEmpty(key)));
}

neff_status neff_torchneuron_cache_clear(neff_torchneuron_cache* cache) {
  neff_status status;
  if (Missing(cache, "cache", &status)) return status;
  return FromStatus(cache->impl->Clear());
}

neff_status neff_torchneuron_cache_acquire_lock(neff_torchneuron_cache* cache,
                                                const char* key,
                                                double timeout_seconds,
                                                neff_torchneuron_lock** out) {
  neff_status status;
  if (Missing(cache, "cache", &status) || Missing(out, "out", &status)) {
    return status;
  }
  *out = nullptr;
  absl::StatusOr<std::unique_ptr<neffd::TorchNeuronCompileLock>> lock =
      cache->impl->AcquireLock(
          OrEmpty(key), timeout_seconds < 0 ? -absl::Seconds(1)
                                            : absl::Seconds(timeout_seconds));
  if (!lock.ok()) return FromStatus(lock.status());
  *out = new neff_torchneuron_lock{*std::move(lock)};
  return NEFF_OK;
}

int neff_torchneuron_lock_held(const neff_torchneuron_lock* lock) {
  return lock != nullptr && lock->impl->held() ? 1 : 0;
}

void neff_torchneuron_lock_release(neff_torchneuron_lock* lock) { delete lock; }

void neff_free(void* p) { std::free(p); }

}  // extern "C"
