// daemon/index/index.h
//
// Index is the daemon's RocksDB index over the shared store: for each entry it
// remembers where the artifact is, what it hashed to, and which file identity
// was verified on this host, so a hit costs one RocksDB read and two stats.
// It is a cache of the store, never the truth: losing it loses no entry (the
// store is probed on a miss), and it survives restarts without a rescan.
//
// Open() repairs nothing silently: a directory RocksDB cannot open is moved
// aside to "{path}.corrupt.{time}" and a fresh index is created; the returned
// `recovered_from` names it so the daemon can say so in one line.
//
// Thread-safe. Entry and byte totals, overall and per (namespace, compiler
// version), are kept in the index itself, updated in the same write batch as
// the entry, so they are right after a crash too and reading them never walks
// the entries. An index written before per-version totals existed gets them
// once, by one full scan inside Open().
#ifndef NEFFD_DAEMON_INDEX_INDEX_H_
#define NEFFD_DAEMON_INDEX_INDEX_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "store/entry_id.h"

namespace rocksdb {
class ColumnFamilyHandle;
class DB;
class WriteBatch;
}  // namespace rocksdb

namespace neffd {

class Index {
 public:
  struct Totals {
    uint64_t entries = 0;
    uint64_t bytes = 0;
  };

  struct VersionTotals {
    Namespace ns;
    std::string compiler_version;
    Totals totals;
  };

  static absl::StatusOr<std::unique_ptr<Index>> Open(const std::string& path);
  ~Index();

  // Set when Open() had to move an unreadable index aside.
  const std::string& recovered_from() const { return recovered_from_; }

  // The record for `id`, or nullopt. Errors are RocksDB I/O failures.
  absl::StatusOr<std::optional<v1::IndexRecord>> Get(const EntryKey& id) const;
  absl::Status Put(const EntryKey& id, const v1::IndexRecord& record);
  absl::Status Delete(const EntryKey& id);
  // Puts many records in one write batch (imports, tools that build an
  // index): all or none are written. Keys must be distinct.
  absl::Status PutAll(
      const std::vector<std::pair<EntryKey, v1::IndexRecord>>& records);

  // Calls `visit` for every entry in key order until it returns false. Sees
  // a consistent snapshot; writers are not blocked.
  void ForEach(const std::function<bool(const EntryKey&,
                                        const v1::IndexRecord&)>& visit) const;
  // The same, starting after the entry whose Canonical() is `after` (from
  // the start if empty): a page of a listing resumes where the last ended.
  void ForEachAfter(
      const std::string& after,
      const std::function<bool(const EntryKey&, const v1::IndexRecord&)>& visit)
      const;

  Totals totals() const;
  // Non-empty (namespace, compiler version) groups, ordered by namespace
  // name then version. Costs no index read.
  std::vector<VersionTotals> version_totals() const;

  // Flushes memtables to disk (shutdown).
  absl::Status Flush();

  // The S3 tier's upload outbox (daemon/remote_tier/outbox.h): opaque rows
  // in a column family of their own in the same database, so it survives
  // restarts and SIGKILL with the index. Puts are synced (WAL fsync).
  absl::Status OutboxPut(absl::string_view key, absl::string_view value);
  absl::Status OutboxDelete(absl::string_view key);
  // In key order until `visit` returns false.
  void OutboxForEach(
      const std::function<bool(absl::string_view key, absl::string_view value)>&
          visit) const;

 private:
  // By (namespace name, compiler version).
  using VersionMap = std::map<std::pair<std::string, std::string>, Totals>;
  struct Loaded;
  // The totals rows; recomputed by one scan (and recorded) for an index
  // written before per-version rows existed.
  static absl::StatusOr<Loaded> LoadTotals(rocksdb::DB* db);

  Index(std::unique_ptr<rocksdb::DB> db, Loaded loaded, std::string recovered);
  // Writes `record` for `id` (deletes it if null) together with the
  // global and per-version totals rows, in one batch.
  absl::Status Apply(const EntryKey& id, const v1::IndexRecord* record);
  // Writes `batch`, unless the index's filesystem is nearly full
  // (ResourceExhausted; writes resume when space returns). Debian's RocksDB
  // 7.8 is built with assertions and aborts the process when its WAL fails
  // a write (a full disk), so the WAL must never meet one; should a write
  // fail anyway, every later one is refused without reaching RocksDB until
  // the daemon restarts. Callers serve from the store meanwhile (Catalog),
  // and the index catches up from it.
  absl::Status Write(rocksdb::WriteBatch* batch, absl::string_view what)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(write_mu_);

  // Serialises writers so the totals stay exact.
  mutable absl::Mutex write_mu_;
  std::unique_ptr<rocksdb::DB> db_;
  // Default (entries, totals), then the outbox; closed before db_.
  std::vector<rocksdb::ColumnFamilyHandle*> families_;
  // The totals as of the last write, changed only by a writer holding
  // write_mu_; readers (GetStats, every metrics write) take only this one,
  // so a slow RocksDB write never delays them.
  mutable absl::Mutex totals_mu_ ABSL_ACQUIRED_AFTER(write_mu_);
  Totals totals_ ABSL_GUARDED_BY(totals_mu_);
  VersionMap versions_ ABSL_GUARDED_BY(totals_mu_);
  bool write_failed_ ABSL_GUARDED_BY(write_mu_) = false;
  std::string first_write_error_ ABSL_GUARDED_BY(write_mu_);
  std::string recovered_from_;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_INDEX_INDEX_H_
