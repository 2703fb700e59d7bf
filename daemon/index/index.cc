#include "daemon/index/index.h"

#include <stdio.h>
#include <string.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"

namespace neffd {
namespace {

// Entries live under "e/{ns}/{version}/{key}"; one meta row holds the totals.
constexpr char kEntryPrefix[] = "e/";
constexpr char kTotalsKey[] = "m/totals";

std::string RowKey(const EntryKey& id) {
  return absl::StrCat(kEntryPrefix, id.Canonical());
}

absl::Status FromRocks(const rocksdb::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  return absl::InternalError(absl::StrCat("index ", what, ": ", s.ToString()));
}

std::string EncodeTotals(const Index::Totals& t) {
  v1::Stats stats;
  stats.set_entries(t.entries);
  stats.set_bytes(t.bytes);
  return stats.SerializeAsString();
}

absl::StatusOr<Index::Totals> ReadTotals(rocksdb::DB* db) {
  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), kTotalsKey, &value);
  if (s.IsNotFound()) return Index::Totals{};
  if (!s.ok()) return FromRocks(s, "read totals");
  v1::Stats stats;
  if (!stats.ParseFromString(value)) {
    return absl::DataLossError("index totals row is corrupt");
  }
  return Index::Totals{stats.entries(), stats.bytes()};
}

rocksdb::Options MakeOptions() {
  rocksdb::Options options;
  options.create_if_missing = true;
  // Small, point-lookup-heavy workload: bloom filters and a modest cache keep
  // a hit to one block read and the daemon's RSS small.
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.block_cache = rocksdb::NewLRUCache(32 << 20);
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  options.write_buffer_size = 16 << 20;
  options.max_open_files = 256;
  options.keep_log_file_num = 2;
  return options;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Index>> Index::Open(const std::string& path) {
  rocksdb::Options options = MakeOptions();
  std::string recovered;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, path, &raw);
  if (!s.ok() && !s.IsIOError()) {
    // Corruption or an unreadable format: the index is only a cache, so
    // keep the damaged copy for inspection and start a fresh one.
    recovered =
        absl::StrCat(path, ".corrupt.", absl::ToUnixSeconds(absl::Now()));
    if (rename(path.c_str(), recovered.c_str()) != 0) {
      return FromRocks(s, "open " + path);
    }
    s = rocksdb::DB::Open(options, path, &raw);
  }
  if (s.IsIOError() && absl::StrContains(s.ToString(), "lock")) {
    return absl::FailedPreconditionError(
        absl::StrCat("index ", path,
                     " is locked by another process; is another neffd "
                     "using this local dir?"));
  }
  if (!s.ok()) return FromRocks(s, "open " + path);
  std::unique_ptr<rocksdb::DB> db(raw);
  absl::StatusOr<Totals> totals = ReadTotals(db.get());
  if (!totals.ok()) return totals.status();
  return std::unique_ptr<Index>(
      new Index(std::move(db), *totals, std::move(recovered)));
}

Index::Index(std::unique_ptr<rocksdb::DB> db, Totals totals,
             std::string recovered)
    : db_(std::move(db)),
      totals_(totals),
      recovered_from_(std::move(recovered)) {}

Index::~Index() = default;

absl::StatusOr<std::optional<v1::IndexRecord>> Index::Get(
    const EntryKey& id) const {
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), RowKey(id), &value);
  if (s.IsNotFound()) return std::nullopt;
  if (!s.ok()) return FromRocks(s, "get");
  v1::IndexRecord record;
  if (!record.ParseFromString(value)) return std::nullopt;
  return record;
}

absl::Status Index::Put(const EntryKey& id, const v1::IndexRecord& record) {
  absl::MutexLock lock(&write_mu_);
  absl::StatusOr<std::optional<v1::IndexRecord>> old = Get(id);
  if (!old.ok()) return old.status();
  Totals next = totals_;
  if (old->has_value()) {
    next.bytes -= (*old)->entry().size();
  } else {
    ++next.entries;
  }
  next.bytes += record.entry().size();
  rocksdb::WriteBatch batch;
  batch.Put(RowKey(id), record.SerializeAsString());
  batch.Put(kTotalsKey, EncodeTotals(next));
  if (absl::Status s =
          FromRocks(db_->Write(rocksdb::WriteOptions(), &batch), "put");
      !s.ok()) {
    return s;
  }
  totals_ = next;
  return absl::OkStatus();
}

absl::Status Index::Delete(const EntryKey& id) {
  absl::MutexLock lock(&write_mu_);
  absl::StatusOr<std::optional<v1::IndexRecord>> old = Get(id);
  if (!old.ok()) return old.status();
  if (!old->has_value()) return absl::OkStatus();
  Totals next = totals_;
  --next.entries;
  next.bytes -= (*old)->entry().size();
  rocksdb::WriteBatch batch;
  batch.Delete(RowKey(id));
  batch.Put(kTotalsKey, EncodeTotals(next));
  if (absl::Status s =
          FromRocks(db_->Write(rocksdb::WriteOptions(), &batch), "delete");
      !s.ok()) {
    return s;
  }
  totals_ = next;
  return absl::OkStatus();
}

void Index::ForEach(
    const std::function<bool(const EntryKey&, const v1::IndexRecord&)>& visit)
    const {
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(kEntryPrefix); it->Valid(); it->Next()) {
    absl::string_view row(it->key().data(), it->key().size());
    if (!absl::StartsWith(row, kEntryPrefix)) break;
    absl::StatusOr<EntryKey> id =
        EntryKey::FromCanonical(row.substr(strlen(kEntryPrefix)));
    v1::IndexRecord record;
    if (!id.ok() ||
        !record.ParseFromArray(it->value().data(), it->value().size())) {
      continue;
    }
    if (!visit(*id, record)) return;
  }
}

Index::Totals Index::totals() const {
  absl::MutexLock lock(&write_mu_);
  return totals_;
}

absl::Status Index::Flush() {
  return FromRocks(db_->Flush(rocksdb::FlushOptions()), "flush");
}

}  // namespace neffd
