// client/torchneuron_cache.h
//
// TorchNeuronCache has the shape of TorchNeuron's persistent NEFF cache
// (exists / get / put / remove / clear by key) and of its compile lock
// (acquire within the lock timeout / release), backed by neffd, so a
// TorchNeuron build can swap it in for its own cache and flock code
// (docs/INTEGRATION.md, "Swapping TorchNeuron's cache for neffd's").
// Keys are TorchNeuron's: 32 lowercase hex digits (client/torchneuron_key.h);
// every entry is in the neff namespace under the compiler version given at
// construction.
//
// The contract, line by line:
//  * Entries are where an unmodified TorchNeuron rank reads them. Put writes
//    {TORCH_NEURONX_NEFF_CACHE_DIR}/{k0k1}/{k2k3}/{key}.neff (a temp file in
//    the shard directory, then rename) and publishes the same bytes through
//    neffd (its store, index and host tier); Get and Exists read neffd first,
//    then that file. So ranks that use this class and ranks that do not find
//    each other's entries, whatever layout the daemon's store has.
//  * The compile lock is neffd's lease on the key. While it is held the
//    daemon holds TorchNeuron's own flock {local_dir}/locks/{key}.lock, so
//    unmodified ranks of the host wait for it, and they wait for each other
//    as before. AcquireLock returns as soon as this process holds the lease,
//    or at once when the entry is already cached (the lock then holds
//    nothing: Get hits). DeadlineExceeded, naming the key and the timeout,
//    when another process (or thread) held the key for the whole timeout;
//    nothing is compiled or written for the caller. Threads of one process
//    wait for each other as processes do.
//  * Put of a key whose lock this object holds writes the file before it
//    publishes through the lease, and the publish ends the lease: every
//    waiter (neffd's clients and unmodified ranks alike) wakes to a hit.
//    Put of a key not locked here takes the lock (within the lock timeout)
//    for the publish. A failed publish after the file is written is a
//    warning, not an error: TorchNeuron's readers have the entry.
//  * Remove deletes the key's file and the store's entry of this compiler
//    version; Clear does what TorchNeuron's cache clear does (every regular
//    `*.neff` file under the cache directory, then its empty shard
//    directories) and removes every entry of the store's neff namespace.
//    Both work on the filesystem: a rank cannot evict through neffd (that is
//    the admin socket's), and the daemon stops serving a removed entry when
//    it next checks it against the store (at most a second later).
//  * No daemon: every call runs on the cache directories as CacheClient's
//    fallback mode does (the flock on the same lock file, atomic publish into
//    the store), so one compile per key holds with the daemon down too.
//  * Errors: InvalidArgument for a key that is not 32 lowercase hex digits
//    (or a bad compiler version), NotFound from Get on a miss,
//    DeadlineExceeded for a lock timeout, Aborted while a compile failure
//    recorded by another client of the key is in force, anything else an I/O
//    error naming the path.
//
// Thread-safe. A TorchNeuronCompileLock is used by one thread and must not
// outlive its TorchNeuronCache; destroying it releases it.
#ifndef NEFFD_CLIENT_TORCHNEURON_CACHE_H_
#define NEFFD_CLIENT_TORCHNEURON_CACHE_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "client/cache_client.h"

namespace neffd {

class Lease;
class Store;
class TorchNeuronCache;

// The compile lock of one key, as AcquireLock returned it.
class TorchNeuronCompileLock {
 public:
  ~TorchNeuronCompileLock();
  TorchNeuronCompileLock(const TorchNeuronCompileLock&) = delete;
  TorchNeuronCompileLock& operator=(const TorchNeuronCompileLock&) = delete;

  const std::string& key() const { return key_; }
  // False once released, and for the lock of an entry that was cached when
  // it was asked for (there was nothing to hold).
  bool held() const;
  // Ends the lease without publishing (a Put has already ended it); the
  // next waiter gets the key. Idempotent.
  void Release();

 private:
  friend class TorchNeuronCache;
  TorchNeuronCompileLock(TorchNeuronCache* cache, std::string key,
                         std::unique_ptr<Lease> lease);

  TorchNeuronCache* const cache_;
  const std::string key_;
  std::unique_ptr<Lease> lease_;
  bool registered_ = false;
};

class TorchNeuronCache {
 public:
  // Settings from the process environment (CacheClient::FromEnvironment);
  // `address` overrides NEFFD_ADDRESS when non-empty.
  static absl::StatusOr<std::unique_ptr<TorchNeuronCache>> FromEnvironment(
      const std::string& compiler_version, const std::string& address = "",
      const ClientTls& tls = ClientTls());

  // `compiler_version` is sent with every request as given.
  TorchNeuronCache(std::unique_ptr<CacheClient> client,
                   std::string compiler_version);
  ~TorchNeuronCache();
  TorchNeuronCache(const TorchNeuronCache&) = delete;
  TorchNeuronCache& operator=(const TorchNeuronCache&) = delete;

  CacheClient& client() { return *client_; }
  const std::string& compiler_version() const { return compiler_version_; }
  // {cache_dir}/{k0k1}/{k2k3}/{key}.neff: where TorchNeuron keeps `key`.
  std::string EntryPath(absl::string_view key) const;

  absl::StatusOr<bool> Exists(absl::string_view key);
  // The entry's bytes; NotFound on a miss.
  absl::StatusOr<std::string> Get(absl::string_view key);
  absl::Status Put(absl::string_view key, absl::string_view neff);
  // OK whether or not the key was cached.
  absl::Status Remove(absl::string_view key);
  absl::Status Clear();

  // Waits up to `timeout` (TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT when
  // negative) for the key's compile lock.
  absl::StatusOr<std::unique_ptr<TorchNeuronCompileLock>> AcquireLock(
      absl::string_view key, absl::Duration timeout = -absl::Seconds(1));

 private:
  friend class TorchNeuronCompileLock;

  absl::StatusOr<EntryKey> Id(absl::string_view key) const;
  absl::StatusOr<Store*> OpenStore();
  // Publishes `path` (holding `neff`) under `lease`; warns on failure.
  void PublishThrough(Lease& lease, const EntryKey& id, const std::string& path,
                      absl::string_view neff);
  void Unregister(const std::string& key);

  const std::unique_ptr<CacheClient> client_;
  const std::string compiler_version_;
  absl::Mutex mu_;
  // The locks this object holds, by key (Put publishes through them).
  std::map<std::string, TorchNeuronCompileLock*> locks_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Store> store_ ABSL_GUARDED_BY(mu_);
};

}  // namespace neffd

#endif  // NEFFD_CLIENT_TORCHNEURON_CACHE_H_
