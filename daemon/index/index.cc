#include "daemon/index/index.h"

#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"

namespace neffd {
namespace {

// Entries live under "e/{ns}/{version}/{key}"; meta rows hold the totals:
// "m/totals" overall, "m/v/{ns}/{version}" per group. "m/format" marks an
// index whose per-version rows are complete (older indexes lack them).
constexpr char kEntryPrefix[] = "e/";
constexpr char kTotalsKey[] = "m/totals";
constexpr char kVersionPrefix[] = "m/v/";
constexpr char kFormatKey[] = "m/format";
constexpr char kFormat[] = "2";
constexpr char kOutboxFamily[] = "outbox";

std::string RowKey(const EntryKey& id) {
  return absl::StrCat(kEntryPrefix, id.Canonical());
}

std::string VersionRowKey(absl::string_view ns, absl::string_view version) {
  return absl::StrCat(kVersionPrefix, ns, "/", version);
}

// Index writes stop while the index's filesystem has less than this (or an
// eighth of its size) free, so RocksDB's WAL never meets a full disk (see
// Index::Write).
constexpr uint64_t kWriteReserveBytes = uint64_t{64} << 20;

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

absl::StatusOr<Index::Totals> DecodeTotals(absl::string_view value) {
  v1::Stats stats;
  if (!stats.ParseFromArray(value.data(), value.size())) {
    return absl::DataLossError("index totals row is corrupt");
  }
  return Index::Totals{stats.entries(), stats.bytes()};
}

absl::StatusOr<Index::Totals> ReadTotals(rocksdb::DB* db) {
  std::string value;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), kTotalsKey, &value);
  if (s.IsNotFound()) return Index::Totals{};
  if (!s.ok()) return FromRocks(s, "read totals");
  return DecodeTotals(value);
}

// A scan reads every block once: it should neither evict the hot blocks of
// point lookups from the cache nor grow it.
rocksdb::ReadOptions ScanOptions() {
  rocksdb::ReadOptions read;
  read.fill_cache = false;
  read.readahead_size = 2 << 20;
  return read;
}

rocksdb::Options MakeOptions() {
  rocksdb::Options options;
  options.create_if_missing = true;
  // Point-lookup-heavy: a bloom filter keeps a miss off the data blocks.
  // Index and filter blocks live in the bounded block cache (high priority,
  // L0's pinned) instead of on the heap per open table, so RSS stays within
  // the cache size however large the index grows.
  rocksdb::BlockBasedTableOptions table;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.block_cache = rocksdb::NewLRUCache(32 << 20);
  table.cache_index_and_filter_blocks = true;
  table.cache_index_and_filter_blocks_with_high_priority = true;
  table.pin_l0_filter_and_index_blocks_in_cache = true;
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  options.write_buffer_size = 16 << 20;
  options.max_write_buffer_number = 2;
  options.max_open_files = 256;
  options.keep_log_file_num = 2;
  return options;
}

}  // namespace

struct Index::Loaded {
  Totals totals;
  VersionMap versions;
};

absl::StatusOr<Index::Loaded> Index::LoadTotals(rocksdb::DB* db) {
  Index::Loaded loaded;
  std::string format;
  rocksdb::Status s = db->Get(rocksdb::ReadOptions(), kFormatKey, &format);
  if (!s.ok() && !s.IsNotFound()) return FromRocks(s, "read format");
  if (s.ok() && format == kFormat) {
    absl::StatusOr<Index::Totals> totals = ReadTotals(db);
    if (!totals.ok()) return totals.status();
    loaded.totals = *totals;
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ScanOptions()));
    for (it->Seek(kVersionPrefix); it->Valid(); it->Next()) {
      absl::string_view row(it->key().data(), it->key().size());
      if (!absl::ConsumePrefix(&row, kVersionPrefix)) break;
      const size_t slash = row.find('/');
      absl::StatusOr<Index::Totals> t = DecodeTotals(
          absl::string_view(it->value().data(), it->value().size()));
      if (slash == absl::string_view::npos || !t.ok()) {
        return absl::DataLossError("index version totals row is corrupt");
      }
      loaded.versions[{std::string(row.substr(0, slash)),
                       std::string(row.substr(slash + 1))}] = *t;
    }
    return loaded;
  }
  std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(ScanOptions()));
  for (it->Seek(kEntryPrefix); it->Valid(); it->Next()) {
    absl::string_view row(it->key().data(), it->key().size());
    if (!absl::ConsumePrefix(&row, kEntryPrefix)) break;
    absl::StatusOr<EntryKey> id = EntryKey::FromCanonical(row);
    v1::IndexRecord record;
    if (!id.ok() ||
        !record.ParseFromArray(it->value().data(), it->value().size())) {
      continue;
    }
    Index::Totals& v = loaded.versions[{std::string(NamespaceName(id->ns())),
                                        id->compiler_version()}];
    ++v.entries;
    v.bytes += record.entry().size();
    ++loaded.totals.entries;
    loaded.totals.bytes += record.entry().size();
  }
  rocksdb::WriteBatch batch;
  for (const auto& [name, t] : loaded.versions) {
    batch.Put(VersionRowKey(name.first, name.second), EncodeTotals(t));
  }
  batch.Put(kTotalsKey, EncodeTotals(loaded.totals));
  batch.Put(kFormatKey, kFormat);
  if (absl::Status w = FromRocks(db->Write(rocksdb::WriteOptions(), &batch),
                                 "record version totals");
      !w.ok()) {
    return w;
  }
  return loaded;
}

absl::StatusOr<std::unique_ptr<Index>> Index::Open(const std::string& path) {
  rocksdb::Options options = MakeOptions();
  options.create_missing_column_families = true;
  // The entries live in the default column family; the upload outbox in a
  // family of its own, so scans of one never read the other.
  const std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName,
       rocksdb::ColumnFamilyOptions(options)},
      {kOutboxFamily, rocksdb::ColumnFamilyOptions(options)}};
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  std::string recovered;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s =
      rocksdb::DB::Open(options, path, families, &handles, &raw);
  if (!s.ok() && !s.IsIOError()) {
    // Corruption or an unreadable format: the index is only a cache, so
    // keep the damaged copy for inspection and start a fresh one.
    recovered =
        absl::StrCat(path, ".corrupt.", absl::ToUnixSeconds(absl::Now()));
    if (rename(path.c_str(), recovered.c_str()) != 0) {
      return FromRocks(s, "open " + path);
    }
    s = rocksdb::DB::Open(options, path, families, &handles, &raw);
  }
  if (s.IsIOError() && absl::StrContains(s.ToString(), "lock")) {
    return absl::FailedPreconditionError(
        absl::StrCat("index ", path,
                     " is locked by another process; is another neffd "
                     "using this local dir?"));
  }
  if (!s.ok()) return FromRocks(s, "open " + path);
  std::unique_ptr<rocksdb::DB> db(raw);
  absl::StatusOr<Loaded> loaded = LoadTotals(db.get());
  if (!loaded.ok()) {
    for (rocksdb::ColumnFamilyHandle* h : handles) {
      db->DestroyColumnFamilyHandle(h);
    }
    return loaded.status();
  }
  auto index = std::unique_ptr<Index>(
      new Index(std::move(db), *std::move(loaded), std::move(recovered)));
  index->families_ = std::move(handles);
  return index;
}

Index::Index(std::unique_ptr<rocksdb::DB> db, Loaded loaded,
             std::string recovered)
    : db_(std::move(db)),
      totals_(loaded.totals),
      versions_(std::move(loaded.versions)),
      recovered_from_(std::move(recovered)) {}

Index::~Index() {
  // RocksDB wants every column family handle closed before the database.
  for (rocksdb::ColumnFamilyHandle* h : families_) {
    db_->DestroyColumnFamilyHandle(h);
  }
}

// Outbox writes take the entries' writer lock too: RocksDB orders
// concurrent writers itself, but in Debian's uninstrumented library, where
// TSan sees the WAL buffer shared without a lock it knows.
absl::Status Index::OutboxPut(absl::string_view key, absl::string_view value) {
  absl::MutexLock lock(&write_mu_);
  rocksdb::WriteOptions write;
  write.sync = true;  // an upload promised is one a power loss cannot drop
  return FromRocks(
      db_->Put(write, families_[1], rocksdb::Slice(key.data(), key.size()),
               rocksdb::Slice(value.data(), value.size())),
      "outbox put");
}

absl::Status Index::OutboxDelete(absl::string_view key) {
  absl::MutexLock lock(&write_mu_);
  return FromRocks(db_->Delete(rocksdb::WriteOptions(), families_[1],
                               rocksdb::Slice(key.data(), key.size())),
                   "outbox delete");
}

void Index::OutboxForEach(
    const std::function<bool(absl::string_view key, absl::string_view value)>&
        visit) const {
  std::unique_ptr<rocksdb::Iterator> it(
      db_->NewIterator(ScanOptions(), families_[1]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    if (!visit(absl::string_view(it->key().data(), it->key().size()),
               absl::string_view(it->value().data(), it->value().size()))) {
      return;
    }
  }
}

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
  return Apply(id, &record);
}

absl::Status Index::Delete(const EntryKey& id) { return Apply(id, nullptr); }

absl::Status Index::Apply(const EntryKey& id, const v1::IndexRecord* record) {
  absl::MutexLock lock(&write_mu_);
  absl::StatusOr<std::optional<v1::IndexRecord>> old = Get(id);
  if (!old.ok()) return old.status();
  if (record == nullptr && !old->has_value()) return absl::OkStatus();
  const std::pair<std::string, std::string> group{
      std::string(NamespaceName(id.ns())), id.compiler_version()};
  Totals next, version;
  {
    absl::MutexLock totals(&totals_mu_);
    auto found = versions_.find(group);
    next = totals_;
    version = found == versions_.end() ? Totals{} : found->second;
  }
  for (Totals* t : {&next, &version}) {
    if (old->has_value()) {
      --t->entries;
      t->bytes -= (*old)->entry().size();
    }
    if (record != nullptr) {
      ++t->entries;
      t->bytes += record->entry().size();
    }
  }
  rocksdb::WriteBatch batch;
  if (record != nullptr) {
    batch.Put(RowKey(id), record->SerializeAsString());
  } else {
    batch.Delete(RowKey(id));
  }
  batch.Put(kTotalsKey, EncodeTotals(next));
  const std::string version_row = VersionRowKey(group.first, group.second);
  if (version.entries == 0) {
    batch.Delete(version_row);
  } else {
    batch.Put(version_row, EncodeTotals(version));
  }
  if (absl::Status s = Write(&batch, record != nullptr ? "put" : "delete");
      !s.ok()) {
    return s;
  }
  absl::MutexLock totals(&totals_mu_);
  totals_ = next;
  if (version.entries == 0) {
    versions_.erase(group);
  } else {
    versions_[group] = version;
  }
  return absl::OkStatus();
}

absl::Status Index::Write(rocksdb::WriteBatch* batch, absl::string_view what) {
  // Local RocksDB files, not the shared store: no Env (store/env.h) here.
  struct statvfs fs;
  if (statvfs(db_->GetName().c_str(), &fs) == 0) {
    const uint64_t size = static_cast<uint64_t>(fs.f_blocks) * fs.f_frsize;
    const uint64_t free = static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (free < std::min(kWriteReserveBytes, size / 8)) {
      return absl::ResourceExhaustedError(
          absl::StrCat("index ", what, ": ", db_->GetName(), " has ", free,
                       " bytes free, under the index's reserve; not written"));
    }
  }
  if (write_failed_) {
    return absl::UnavailableError(absl::StrCat(
        "index ", what, ": the index refuses writes since one failed (",
        first_write_error_, "); it catches up after the daemon restarts"));
  }
  rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), batch);
  if (!s.ok()) {
    write_failed_ = true;
    first_write_error_ = s.ToString();
  }
  return FromRocks(s, what);
}

absl::Status Index::PutAll(
    const std::vector<std::pair<EntryKey, v1::IndexRecord>>& records) {
  absl::MutexLock lock(&write_mu_);
  Totals next;
  VersionMap versions;
  {
    absl::MutexLock totals(&totals_mu_);
    next = totals_;
    versions = versions_;
  }
  rocksdb::WriteBatch batch;
  for (const auto& [id, record] : records) {
    absl::StatusOr<std::optional<v1::IndexRecord>> old = Get(id);
    if (!old.ok()) return old.status();
    Totals& version =
        versions[{std::string(NamespaceName(id.ns())), id.compiler_version()}];
    for (Totals* t : {&next, &version}) {
      if (old->has_value()) {
        --t->entries;
        t->bytes -= (*old)->entry().size();
      }
      ++t->entries;
      t->bytes += record.entry().size();
    }
    batch.Put(RowKey(id), record.SerializeAsString());
  }
  batch.Put(kTotalsKey, EncodeTotals(next));
  for (const auto& [group, t] : versions) {
    batch.Put(VersionRowKey(group.first, group.second), EncodeTotals(t));
  }
  if (absl::Status s = Write(&batch, "put all"); !s.ok()) return s;
  absl::MutexLock totals(&totals_mu_);
  totals_ = next;
  versions_ = std::move(versions);
  return absl::OkStatus();
}

void Index::ForEach(
    const std::function<bool(const EntryKey&, const v1::IndexRecord&)>& visit)
    const {
  ForEachAfter("", visit);
}

void Index::ForEachAfter(
    const std::string& after,
    const std::function<bool(const EntryKey&, const v1::IndexRecord&)>& visit)
    const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ScanOptions()));
  const std::string from = absl::StrCat(kEntryPrefix, after);
  it->Seek(from);
  if (!after.empty() && it->Valid() && it->key() == rocksdb::Slice(from)) {
    it->Next();
  }
  for (; it->Valid(); it->Next()) {
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
  absl::MutexLock lock(&totals_mu_);
  return totals_;
}

std::vector<Index::VersionTotals> Index::version_totals() const {
  absl::MutexLock lock(&totals_mu_);
  std::vector<VersionTotals> out;
  out.reserve(versions_.size());
  for (const auto& [group, t] : versions_) {
    out.push_back(VersionTotals{group.first == NamespaceName(Namespace::kHlo)
                                    ? Namespace::kHlo
                                    : Namespace::kNeff,
                                group.second, t});
  }
  return out;
}

absl::Status Index::Flush() {
  {
    absl::MutexLock lock(&write_mu_);
    // Not after a failed write, for the same reason as Write.
    if (write_failed_) return absl::OkStatus();
  }
  return FromRocks(db_->Flush(rocksdb::FlushOptions()), "flush");
}

}  // namespace neffd
