/* client/neffclient.h
 *
 * The C ABI of the neffd client library, for runtimes that are not C++. It
 * exposes the calls of client/cache_client.h with the same contract: one
 * neff_client per process (thread-safe), neff_get_or_compile returns the path
 * of a cached NEFF and compiles it through a C callback only if nobody on the
 * host has it or is compiling it; without a daemon the same protocol runs on
 * the cache directories; settings come from the TORCH_NEURONX_* environment
 * read once at neff_client_new.
 *
 * Every call returns a neff_status. On anything but NEFF_OK (and NEFF_MISS,
 * which is not an error) neff_last_error() describes the problem in one line
 * (the daemon's message, or the compiler's failure with its working
 * directory). Strings returned through `char**` are allocated with malloc;
 * release them with neff_free. No function keeps a pointer it was given
 * after it returns.
 *
 * The compile callback runs on the calling thread. It writes the artifact to
 * job->output_path (in job->workdir, the spec's artifact directory) and
 * returns NEFF_COMPILE_OK, NEFF_COMPILE_ERROR (a deterministic compiler
 * error: recorded, and returned to every waiter until its retry-after time;
 * the log is what neff_compile_set_log gave, else the tail of
 * {workdir}/log-neuron-cc.txt) or NEFF_COMPILE_CANCELLED (nothing recorded).
 */
#ifndef NEFFD_CLIENT_NEFFCLIENT_H_
#define NEFFD_CLIENT_NEFFCLIENT_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum neff_status {
  NEFF_OK = 0,
  NEFF_MISS = 1,             /* neff_lookup: not cached */
  NEFF_INVALID_ARGUMENT = 2, /* a bad namespace, version, key or argument */
  NEFF_COMPILE_FAILED = 3,   /* this compile, or a recorded one, failed */
  NEFF_CANCELLED = 4,        /* the callback cancelled the compile */
  NEFF_ERROR = 5,            /* anything else (I/O, ...) */
  NEFF_LOCK_TIMEOUT = 6      /* a compile lock stayed held elsewhere */
} neff_status;

typedef enum neff_compile_status {
  NEFF_COMPILE_OK = 0,
  NEFF_COMPILE_ERROR = 1,
  NEFF_COMPILE_CANCELLED = 2
} neff_compile_status;

typedef struct neff_client neff_client;

typedef struct neff_compile_job {
  const char* ns; /* "neff" or "hlo" */
  const char* compiler_version;
  const char* key;
  const char* workdir;     /* exists; the compiler's working directory */
  const char* output_path; /* write the artifact here */
  void* internal;          /* for neff_compile_set_log */
} neff_compile_job;

typedef neff_compile_status (*neff_compile_fn)(void* user_data,
                                               const neff_compile_job* job);

/* The failure log of a NEFF_COMPILE_ERROR (copied). */
void neff_compile_set_log(const neff_compile_job* job, const char* log);

/* A client for the daemon at `address` (NULL or "": NEFFD_ADDRESS, else the
 * default socket). Connects lazily; never fails because the daemon is down. */
neff_status neff_client_new(const char* address, neff_client** out);

/* neff_client_new with mutual TLS for a TCP `address` (docs/SECURITY.md):
 * PEM files of the CA that signed the daemon's certificate, this client's
 * certificate chain and its private key; NULL or "" for none. A unix socket
 * ignores them. NEFF_INVALID_ARGUMENT (neff_last_error() names the file and
 * why) if a file given cannot be read. Give all three: with only some (no
 * client certificate, say) the client does what the C++ client does with
 * such a CacheClientOptions::tls: it warns on stderr at its first call and
 * connects without TLS, which such a daemon refuses, so the calls fall back
 * to the cache directories. */
neff_status neff_client_new_tls(const char* address, const char* tls_ca,
                                const char* tls_cert, const char* tls_key,
                                neff_client** out);
void neff_client_free(neff_client* client);

/* The cache key (64 lowercase hex digits, NUL-terminated) of a lowered graph:
 * see CacheClient::DeriveKey. `platform_target` and `base_key` may be NULL.
 * `key_out` must have room for NEFF_KEY_SIZE bytes. */
#define NEFF_KEY_SIZE 65
neff_status neff_derive_key(const neff_client* client, const void* hlo_bytes,
                            size_t hlo_size, const char* compiler_flags,
                            const char* compiler_version,
                            const char* platform_target, const char* base_key,
                            char* key_out);

/* TorchNeuron's persistent cache key (client/torchneuron_key.h): XXH3-128 of
 * the base key's bytes followed by the IR bytes, as 32 lowercase hex digits,
 * NUL-terminated; the name under which an unmodified TorchNeuron rank caches
 * the same graph. Needs no client. Either buffer may be NULL when its size is
 * 0 (NEFF_INVALID_ARGUMENT otherwise). `key_out` must have room for
 * NEFF_TORCHNEURON_KEY_SIZE bytes. */
#define NEFF_TORCHNEURON_KEY_SIZE 33
neff_status neff_torchneuron_key(const void* base_key, size_t base_key_size,
                                 const void* ir_bytes, size_t ir_size,
                                 char* key_out);

/* NEFF_OK with *path_out set, NEFF_MISS with *path_out = NULL, or an error
 * (NEFF_COMPILE_FAILED while a recorded failure is in force). */
neff_status neff_lookup(neff_client* client, const char* ns,
                        const char* compiler_version, const char* key,
                        char** path_out);

/* The path of the entry, compiled with `compile` if needed. */
neff_status neff_get_or_compile(neff_client* client, const char* ns,
                                const char* compiler_version, const char* key,
                                neff_compile_fn compile, void* user_data,
                                char** path_out);

/* This thread's message for the last call that failed. */
const char* neff_last_error(void);

/* What this thread's last NEFF_COMPILE_FAILED carried: the compiler's log,
 * when the key is compiled again (unix milliseconds; 0 if unknown), and this
 * rank's kept working directory ("" for a rank that only waited). All empty
 * when the thread's last failed call failed otherwise. */
const char* neff_last_failure_log(void);
int64_t neff_last_failure_retry_after_ms(void);
const char* neff_last_failure_workdir(void);

/* This client's counters since it was made (client/metrics.h). */
typedef struct neff_counters {
  uint64_t lookups;
  uint64_t hits;
  uint64_t waits;
  double wait_seconds;
  uint64_t compiles;
  double compile_seconds;
  uint64_t fallbacks;
  uint64_t failures;
  uint64_t lock_timeouts;
  uint64_t uncached;
} neff_counters;
neff_status neff_client_counters(const neff_client* client, neff_counters* out);

/* Writes this rank's metric tables now (TORCH_NEURONX_ENABLED_METRIC_TABLES
 * into TORCH_NEURONX_METRICS_DIR). */
neff_status neff_client_write_metrics(neff_client* client);

/* --- The segment allocator (allocator/segment_pool.h) ---
 *
 * A caching pool configured by TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG, over
 * host memory here (NRT's device memory on a NeuronCore). Thread-safe. */
typedef struct neff_pool neff_pool;

/* A pool of at most `capacity_bytes` (0: unlimited). NEFF_INVALID_ARGUMENT
 * when the allocator's configuration is bad. */
neff_status neff_pool_new(size_t capacity_bytes, neff_pool** out);
/* The process's pool, made on first use and never freed. */
neff_status neff_default_pool(neff_pool** out);
/* Frees a pool from neff_pool_new (never the default pool). */
void neff_pool_free(neff_pool* pool);
neff_status neff_pool_allocate(neff_pool* pool, size_t bytes, void** out);
neff_status neff_pool_release(neff_pool* pool, void* ptr);
/* Returns cached segments to the device; *released_bytes if not NULL. */
neff_status neff_pool_empty_cache(neff_pool* pool, size_t* released_bytes);
/* torch.cuda.memory_stats()-style statistics, one "name value" per line. */
neff_status neff_pool_memory_stats(const neff_pool* pool, char** text_out);
void neff_pool_reset_peak_memory_stats(neff_pool* pool);
/* Reports `pool`'s statistics in the client's "allocator" metric table
 * (default: the default pool's, made when the table is first written). The
 * pool must outlive the client. */
void neff_client_attach_pool(neff_client* client, neff_pool* pool);

/* --- TorchNeuron's persistent cache and compile lock ---
 *
 * client/torchneuron_cache.h, with its contract: exists / get / put /
 * remove / clear by TorchNeuron key (32 lowercase hex digits, see
 * neff_torchneuron_key), entries in TorchNeuron's own layout and published
 * through neffd, and the compile lock as neffd's lease on the key (unmodified
 * TorchNeuron ranks of the host wait for it). Thread-safe; a lock is used by
 * one thread and released before its cache is freed. */
typedef struct neff_torchneuron_cache neff_torchneuron_cache;
typedef struct neff_torchneuron_lock neff_torchneuron_lock;

/* A cache for the daemon at `address` (NULL or "": NEFFD_ADDRESS, else the
 * default socket) whose requests carry `compiler_version`; settings from the
 * TORCH_NEURONX_* environment. Never fails because the daemon is down. */
neff_status neff_torchneuron_cache_new(const char* address,
                                       const char* compiler_version,
                                       neff_torchneuron_cache** out);
void neff_torchneuron_cache_free(neff_torchneuron_cache* cache);
/* NEFF_OK if cached, NEFF_MISS if not. */
neff_status neff_torchneuron_cache_exists(neff_torchneuron_cache* cache,
                                          const char* key);
/* NEFF_OK with the entry's bytes in *data_out (malloc'd: neff_free) and
 * *size_out, or NEFF_MISS with *data_out = NULL. */
neff_status neff_torchneuron_cache_get(neff_torchneuron_cache* cache,
                                       const char* key, void** data_out,
                                       size_t* size_out);
/* Publishes `size` bytes (not 0) under `key`: through the key's lock if this
 * cache holds it (its waiters wake), else under the lock taken for it
 * (NEFF_LOCK_TIMEOUT if that stays held elsewhere). */
neff_status neff_torchneuron_cache_put(neff_torchneuron_cache* cache,
                                       const char* key, const void* data,
                                       size_t size);
neff_status neff_torchneuron_cache_remove(neff_torchneuron_cache* cache,
                                          const char* key);
neff_status neff_torchneuron_cache_clear(neff_torchneuron_cache* cache);
/* Waits up to `timeout_seconds` (negative: TORCH_NEURONX_NEFF_CACHE_LOCK_
 * TIMEOUT) for the key's compile lock: NEFF_OK with *out, or
 * NEFF_LOCK_TIMEOUT (neff_last_error() names the key and the wait). */
neff_status neff_torchneuron_cache_acquire_lock(neff_torchneuron_cache* cache,
                                                const char* key,
                                                double timeout_seconds,
                                                neff_torchneuron_lock** out);
/* 1 while the lock holds the key, 0 once released or when the entry was
 * already cached when it was asked for (there was nothing to hold). */
int neff_torchneuron_lock_held(const neff_torchneuron_lock* lock);
/* Releases the lock (the next waiter gets the key) and frees it. */
void neff_torchneuron_lock_release(neff_torchneuron_lock* lock);

void neff_free(void* p);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* NEFFD_CLIENT_NEFFCLIENT_H_ */
