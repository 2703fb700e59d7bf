// daemon/index/catalog.h
//
// Catalog answers "is this entry cached, and where?" for the daemon by
// combining the local Index with the shared Stores:
//   - a hit in the index is served if the artifact still has the identity
//     that was verified on this host (two stats, no reads), checked at most
//     once per `revalidate` per entry so a hot entry costs the shared
//     filesystem nothing per rank; within that window the entry is served
//     from memory without reading the index either (Record and Forget, the
//     only writers of entries, drop it there);
//   - otherwise the store is probed and fully verified (damage is
//     quarantined there); a verified entry is written back to the index, so
//     entries published by other hosts become hits without a restart;
//   - concurrent probes of one key share a single store probe (negative and
//     positive results alike), so 128 ranks missing together cost one probe;
//   - hits record a last-access time in memory, flushed to the index in
//     batches (FlushAccessTimes), for LRU eviction and "served recently";
//   - the store is the truth and the index only a cache of it: an index
//     that cannot be read or written (the local disk full) never turns a
//     hit into an error. The entry is served from the store's verification
//     and the failed write counted (index_write_failures); the index catches
//     up at the next write that succeeds.
//
// Thread-safe. Stores and index must outlive the catalog.
#ifndef NEFFD_DAEMON_INDEX_CATALOG_H_
#define NEFFD_DAEMON_INDEX_CATALOG_H_

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "daemon/index/index.h"
#include "store/env.h"
#include "store/store.h"

namespace neffd {

class Catalog {
 public:
  Catalog(Store* neff_store, Store* hlo_store, Index* index,
          Env* env = Env::Default(),
          absl::Duration revalidate = absl::Seconds(1));

  Store& StoreFor(const EntryKey& id) const;
  Store& StoreFor(Namespace ns) const;
  Index& index() const { return *index_; }

  // The verified entry for `id`, or nullopt on a miss.
  absl::StatusOr<std::optional<v1::Entry>> Find(const EntryKey& id);

  // Indexes an entry that was just published or verified on this host.
  absl::Status Record(const EntryKey& id, const StoredEntry& stored);

  // Drops `id` from the index (the store is the caller's business).
  absl::Status Forget(const EntryKey& id);

  // Index writes that failed on the hit path (served anyway) and in Record.
  uint64_t index_write_failures() const { return index_write_failures_; }

  // When `id` was last served on this host (InfinitePast if never, as far as
  // this process remembers or the index recorded).
  absl::Time LastServed(const EntryKey& id) const;
  // The same for an entry whose index `record` the caller has read already
  // (a listing), without reading it again.
  absl::Time LastServed(const EntryKey& id,
                        const v1::IndexRecord& record) const;

  // Writes remembered access times to the index, and forgets hot entries
  // whose validation has expired (so memory follows the hot set, not the
  // index).
  absl::Status FlushAccessTimes();

  // `observer` sees each batch of access times FlushAccessTimes writes (by
  // EntryKey::Canonical()), so the host's access journal on the shared store
  // learns what was served without a hook on the hit path. Set before
  // serving; not thread-safe against a concurrent flush.
  using AccessObserver =
      std::function<void(const absl::flat_hash_map<std::string, absl::Time>&)>;
  void SetAccessObserver(AccessObserver observer) {
    access_observer_ = std::move(observer);
  }

  // `observer` hears of each entry a lookup found on the store without a
  // record and recorded (an unmodified TorchNeuron rank's put), so the S3
  // tier uploads it as it does a publish. Set before serving.
  using AdoptionObserver =
      std::function<void(const EntryKey&, const v1::Entry&)>;
  void SetAdoptionObserver(AdoptionObserver observer) {
    adoption_observer_ = std::move(observer);
  }

 private:
  struct Probe;
  // An entry whose artifact was seen unchanged in the store at `validated`.
  struct Hot {
    absl::Time validated;
    v1::Entry entry;
  };
  using FindResult = absl::StatusOr<std::optional<v1::Entry>>;

  FindResult ProbeStore(const EntryKey& id);
  void Touch(const std::string& canonical);
  // Drops `canonical` from the hot entries and makes any Find that read the
  // index before now leave them alone.
  void Invalidate(const std::string& canonical)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Store* const neff_store_;
  Store* const hlo_store_;
  Index* const index_;
  Env* const env_;  // the clock
  const absl::Duration revalidate_;
  AccessObserver access_observer_;
  AdoptionObserver adoption_observer_;
  std::atomic<uint64_t> index_write_failures_{0};

  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Probe>> probes_
      ABSL_GUARDED_BY(mu_);
  // Access times not yet flushed, by EntryKey::Canonical().
  absl::flat_hash_map<std::string, absl::Time> accessed_ ABSL_GUARDED_BY(mu_);
  // Entries validated within `revalidate`, by EntryKey::Canonical().
  absl::flat_hash_map<std::string, Hot> hot_ ABSL_GUARDED_BY(mu_);
  // Bumped by every Invalidate: a Find that read the index under an older
  // generation may have read a record that is gone, so it must not make it
  // hot.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_INDEX_CATALOG_H_
