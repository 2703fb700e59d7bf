// store/store.h
//
// Store is one namespace's shared, content-addressed cache on a POSIX
// directory that many hosts mount (FSx for Lustre in production), in
// TorchNeuron's own layout (store/layout.h), so unmodified TorchNeuron ranks
// and neffd share one cache:
//
//   {root}/{k0k1}/{k2k3}/{key}.neff | .hlo   the artifact, by rename
//   {root}/{k0k1}/{k2k3}/{key}.neffd/        neffd's records: model.done
//                                            (written last), model.log,
//                                            compile_flags.json, the lease
//   {root}/quarantine/                       damage, each with a reason
//
// Everything Find returns was verified (size, and sha256 once per file
// identity); everything Publish writes appears atomically or not at all.
// What a lookup makes of what it finds is JudgeEntry's (store/layout.h): an
// empty or absent artifact is a miss; records without an artifact are a
// cleared entry (a miss, not damage); an artifact no record describes (an
// unmodified rank's put, or a publish interrupted after its verified bytes
// were renamed into place) is hashed and recorded ("adopted"); a record for
// another compiler version is a miss. Damage (a recorded artifact whose size
// or digest no longer matches, an unparseable model.done, and anything
// planted in a file's place: a FIFO, a socket, a symlink, a directory, a
// record over its bound) is moved to quarantine with a reason and reported
// as NotFound.
//
// Every filesystem call and clock reading goes through StoreOptions::env
// (store/env.h), which tests wrap to inject faults.
//
// Thread-safe. Keys reach paths only through a validated EntryKey. No method
// waits for another process: waiting is the LockTable's job.
#ifndef NEFFD_STORE_STORE_H_
#define NEFFD_STORE_STORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "config/defaults.h"
#include "proto/neffd/v1/records.pb.h"
#include "store/counting_env.h"
#include "store/digest.h"
#include "store/entry_id.h"
#include "store/env.h"
#include "store/events.h"
#include "store/file_util.h"
#include "store/lock_paths.h"

namespace neffd {

// Publish metadata whose value (the key-inputs record of client/explain.h,
// JSON) Publish also writes beside the artifact as kKeyInputsFileName, for
// people and tools that read the store without the daemon.
inline constexpr char kKeyInputsMetadata[] = "key_inputs";
inline constexpr char kKeyInputsFileName[] = "compile_flags.json";

struct StoreOptions {
  std::string root;
  Namespace ns = Namespace::kNeff;
  // Written into temp names and model.done so an operator can tell who wrote
  // what on a shared filesystem.
  std::string host_id;
  // How long a recorded compile failure is served before a retry.
  absl::Duration failed_ttl = config::kFailedTtl;
  // The filesystem and the clock; not owned. The store counts the calls it
  // makes through it (metadata_ops()).
  Env* env = Env::Default();
  // Where damage found (an entry quarantined) is reported.
  EventSink on_event = StderrEventSink;
  // An artifact larger than this is damage (store/file_util.h
  // OpenRegularFile), like a FIFO in its place.
  uint64_t max_artifact_bytes = uint64_t{64} << 30;
};

// What identifies one version of a file: a change in any field means the
// verified digest no longer applies. ctime is included because a writer can
// restore mtime (touch -r) but not ctime.
struct FileIdentity {
  uint64_t inode = 0;
  uint64_t size = 0;
  int64_t mtime_ns = 0;
  int64_t ctime_ns = 0;
  friend bool operator==(const FileIdentity& a, const FileIdentity& b) {
    return a.inode == b.inode && a.size == b.size && a.mtime_ns == b.mtime_ns &&
           a.ctime_ns == b.ctime_ns;
  }
};

// The identity of the file `st` describes.
FileIdentity IdentityOf(const struct stat& st);

struct StoredEntry {
  v1::Entry entry;
  FileIdentity identity;  // of the artifact, as verified
  // This Find recorded an artifact no record described (an unmodified
  // rank's put): a new entry as far as neffd's tiers know.
  bool adopted = false;
};

struct Producer {
  std::string host;
  int64_t pid = 0;
};

// A file that a publish writes before it is complete
// (".{name}.tmp.{host}.{pid}.{random}", store/file_util.h): one left in a
// shard or records directory by a crashed publish is an orphan, gc's to
// remove.
struct TempFile {
  std::string name;
  uint64_t size = 0;
  absl::Time mtime;
};

// Where the store puts what is no longer an entry: quarantine/ (damage, kept
// for operators to look at) and .trash/ (removed entries, deleted at once;
// what is left there could not be).
enum class AsideDir { kQuarantine, kTrash };

// How much gc lets an AsideDir keep: items older than max_age go, then the
// oldest until the rest is within max_bytes (0: no size bound).
struct AsideBounds {
  absl::Duration max_age = absl::InfiniteDuration();
  uint64_t max_bytes = 0;
  bool dry_run = false;  // count what would go, remove nothing
};

struct AsideCounts {
  uint64_t items = 0;
  uint64_t bytes = 0;
};

struct AsideSweep {
  AsideCounts removed;
  AsideCounts kept;
};

// What an entry's artifact and records directory hold (import, gc,
// operators).
struct EntryState {
  bool exists = false;        // an artifact or a records directory
  bool has_artifact = false;  // a non-empty regular file
  uint64_t artifact_size = 0;
  absl::Time artifact_mtime;
  bool has_done = false;
  absl::Time done_mtime;
  bool has_log = false;
  // IsLockFileName (store/lock_paths.h): leases and *.lock.
  std::vector<std::pair<std::string, absl::Time>> lock_files;
  std::vector<TempFile> temp_files;
};

// Where one entry's files are (store/layout.h): the artifact in its shard
// directory, the records in "{key}.neffd/" beside it. Temp files are written
// in the directory of the file they become.
struct EntryPaths {
  std::string artifact_dir;  // the artifact and its temp files
  std::string artifact_name;
  std::string records_dir;  // done, log, key inputs, lease
  std::string done_name;
  std::string log_name;
  std::string key_inputs_name;
  std::string lease_name;

  std::string artifact() const { return artifact_dir + "/" + artifact_name; }
  std::string done() const { return records_dir + "/" + done_name; }
  std::string log() const { return records_dir + "/" + log_name; }
  std::string key_inputs() const { return records_dir + "/" + key_inputs_name; }
  std::string lease() const { return records_dir + "/" + lease_name; }
};

struct PublishResult {
  StoredEntry stored;
  bool already_cached = false;
};

class Store {
 public:
  // Opens `options.root`, creating it if needed. Fails with a message naming
  // the path if it is not a writable directory.
  static absl::StatusOr<std::unique_ptr<Store>> Open(
      const StoreOptions& options);

  const std::string& root() const { return options_.root; }
  // Metadata operations (open, stat, rename, mkdir, unlink, listing or fsync
  // of a directory, ...; store/counting_env.h) this store has made so far.
  uint64_t metadata_ops() const { return env_.metadata_ops(); }
  // Entries this process moved to quarantine/ (damage found).
  uint64_t quarantined() const { return quarantined_; }
  Namespace ns() const { return options_.ns; }
  // {root}/{k0k1}/{k2k3}/{key}.neffd: the entry's records and its lease.
  std::string RecordsDir(const EntryKey& id) const;
  std::string ArtifactPath(const EntryKey& id) const;
  EntryPaths PathsOf(const EntryKey& id) const;

  // The hit path: true if model.done exists and the artifact still has the
  // identity that was verified. Two stats, no reads.
  bool StillValid(const EntryKey& id, const FileIdentity& verified) const;

  // True if model.done exists: someone finished a publish (not a check of
  // the entry: Find does that). One stat.
  bool HasDoneRecord(const EntryKey& id) const;

  // What Find does with an entry it finds damaged.
  enum class OnDamage {
    // Moves it to quarantine/ and answers NotFound. The move goes by name,
    // so a check that raced a fresh publish of the key could move the new
    // entry aside: only for callers that exclude this host's publishers.
    kQuarantine,
    // Leaves it where it is and answers DataLoss naming the damage.
    kReport,
  };

  // Full check of the entry on disk (reads model.done, hashes the artifact;
  // store/layout.h JudgeEntry). NotFound if there is no entry for the key
  // and version; damaged entries as `on_damage` says. An artifact no record
  // describes is hashed and served, and recorded too unless `on_damage` is
  // kReport or a lease is out on it. An artifact that changed while it was
  // hashed is a miss (NotFound): under the key's lock the caller finds what
  // replaced it. Other errors are I/O failures.
  absl::StatusOr<StoredEntry> Find(const EntryKey& id,
                                   OnDamage on_damage = OnDamage::kQuarantine);

  // Installs the content read from `fd` (from its current offset) under `id`
  // after checking it against `size` and `sha256` (empty: whatever the
  // content hashes to is the entry's digest). If a valid entry exists
  // already, nothing is read and the result says already_cached.
  // InvalidArgument on a size/digest mismatch; ResourceExhausted when the
  // filesystem is full; any other failed step returns the Env's error, which
  // names it. On every error nothing is left behind: no temp file, and no
  // artifact without model.done.
  //
  // Durability: when this returns OK the entry survives a power loss. The
  // order leaves nothing or a whole entry at every crash point:
  //   1. a directory it had to create: its parent is fsynced; the first
  //      publish into a shard directory (per Store) also fsyncs every
  //      directory from the shard's parent up to the root, since another
  //      writer may have created them without (the lease file of a Lock,
  //      daemon/locks/file_locks.h);
  //   2. the artifact is written to a temp file in its shard directory and
  //      fsynced, then renamed to its name; the shard directory is fsynced;
  //   3. the key inputs (if any) are written, fsynced and renamed in the
  //      records directory;
  //   4. model.done (with the artifact's inode) is written to a temp file
  //      and fsynced, renamed, and the records directory fsynced.
  // The bytes are verified before 2's rename, so a crash after it leaves a
  // whole artifact without model.done: the next lookup adopts it (hashes and
  // records it). A temp file left by a crash is swept by gc. Every call goes
  // through the Env, so a test can kill the process after any of them
  // (store/testing/).
  //
  // `verified`, if set, runs with the content's size and digest once it has
  // been read, matched `size` and `sha256` and will become the entry (no
  // other entry was there), but before it is durable and before anything of
  // it has its final name: the caller may hand its own copy of the bytes to
  // readers on this host without waiting for the shared filesystem, or
  // record that the entry is coming before a crash could leave it without
  // the record.
  using Verified = std::function<void(const CopyResult& content)>;
  absl::StatusOr<PublishResult> PublishFromFd(
      const EntryKey& id, int fd, uint64_t size, const std::string& sha256,
      const Producer& producer, const std::map<std::string, std::string>& md,
      const Verified& verified = nullptr);
  absl::StatusOr<PublishResult> PublishBytes(
      const EntryKey& id, absl::string_view bytes, const std::string& sha256,
      const Producer& producer, const std::map<std::string, std::string>& md,
      const Verified& verified = nullptr);
  // Both of the above: `write` fills the entry's temp file (open for
  // writing as `out_fd`, named `out_name`, on the shared store) and returns
  // the size and sha256 of what it wrote, which must be what it hashed. For
  // a caller that writes other copies of the bytes in the same pass.
  using ContentWriter = std::function<absl::StatusOr<CopyResult>(
      int out_fd, absl::string_view out_name)>;
  absl::StatusOr<PublishResult> PublishWritten(
      const EntryKey& id, uint64_t size, const std::string& sha256,
      const Producer& producer, const std::map<std::string, std::string>& md,
      const ContentWriter& write, const Verified& verified = nullptr);

  // Records a deterministic compile failure (model.log) for failed_ttl and
  // returns it as callers will see it.
  absl::StatusOr<v1::Failure> RecordFailure(const EntryKey& id,
                                            absl::string_view log);
  // The failure in force for `id`, if any.
  std::optional<v1::Failure> FindFailure(const EntryKey& id) const;

  // Moves the entry's artifact and model.done into a fresh directory of
  // {root}/quarantine/ with a reason file and returns it. The records
  // directory stays: it may hold another host's lease. With `judged_inode`,
  // only that artifact is moved: one another host has renamed in since (it
  // quarantined the same damage and republished) is put back, and an
  // artifact already gone (another host filed it first) files nothing:
  // either way the answer is FailedPrecondition, so one damage is filed
  // once.
  absl::StatusOr<std::string> Quarantine(
      const EntryKey& id, absl::string_view reason,
      std::optional<ino_t> judged_inode = std::nullopt);

  // --- Maintenance (store_maintenance.cc) ---

  // Calls `visit` for every key that has an artifact or a records directory
  // in its own shard, with the compiler version its model.done records
  // (empty without one); stops early when `visit` returns false. Lists every
  // shard directory and reads each model.done: maintenance only.
  absl::Status ForEachEntry(
      const std::function<bool(const EntryKey&)>& visit) const;
  EntryState Inspect(const EntryKey& id) const;
  // Renames the entry's artifact and records directory into {root}/.trash,
  // then deletes them: a reader that already opened a file keeps reading
  // it. NotFound if neither exists.
  absl::Status Remove(const EntryKey& id);
  // Removes one temp file (EntryState::temp_files) of the entry;
  // InvalidArgument for a name that is not a temp file's.
  absl::Status RemoveTempFile(const EntryKey& id, const std::string& name);
  // Applies `bounds` to quarantine/ or .trash/: one item per name there (a
  // quarantined artifact and its ".reason" are one), aged by its newest
  // mtime (when it was moved aside) against `now`, the store's clock
  // (FilesystemNow), oldest removed first.
  absl::StatusOr<AsideSweep> SweepAside(AsideDir dir, const AsideBounds& bounds,
                                        absl::Time now);
  // Breaks one lock file of the entry (rename, then unlink).
  absl::Status RemoveLockFile(const EntryKey& id, const std::string& name);
  // --- Migration from the layout before TorchNeuron's ---
  //
  // neffd before issue 27 wrote {root}/neuronxcc-{version}/MODULE_{key}/
  // (model.neff | model.hlo, model.done, compile_flags.json, model.log).

  // Calls `visit` for every such directory whose names are valid.
  absl::Status ForEachOldLayoutEntry(
      const std::function<bool(const EntryKey&)>& visit) const;
  enum class Migration {
    kMoved,        // its artifact renamed into this layout and recorded
    kLocked,       // a lock or lease file in it: left for its holder
    kIncomplete,   // no non-empty artifact: left alone
    kAlreadyHere,  // this layout has the key already: left alone
    kDamaged,      // its bytes do not match its old record: quarantined
  };
  // Moves one old-layout entry in: its artifact by rename (no copy), its key
  // inputs, and a record verified against the old one (its producer and
  // metadata kept); then removes the old directory.
  absl::StatusOr<Migration> MigrateOldLayoutEntry(const EntryKey& id);

  // The shared filesystem's clock: the mtime of a file just touched here.
  absl::StatusOr<absl::Time> FilesystemNow() const;

 private:
  explicit Store(StoreOptions options)
      : options_(std::move(options)), env_(options_.env) {}

  absl::string_view ArtifactName() const;
  absl::Status WriteDone(const EntryKey& id, const v1::DoneRecord& done);
  // Fsyncs the directories holding `shard_dir`'s name and its ancestors'
  // up to the root, once per shard directory.
  absl::Status SyncShardNames(const std::string& shard_dir);
  // Find's answer for a damaged entry (see OnDamage).
  absl::Status Damaged(const EntryKey& id, absl::string_view reason,
                       OnDamage on_damage,
                       std::optional<ino_t> judged_inode = std::nullopt);

  // A fresh, unique place under {root}/quarantine/ for a damaged `id`.
  std::string QuarantineTarget(const EntryKey& id) const;
  // {root}/neuronxcc-{version}/MODULE_{key}: `id`'s old-layout directory.
  std::string OldLayoutDir(const EntryKey& id) const;
  // Moves what stands at the entry's record names but is not what belongs
  // there (a records "directory" that is a file; compile_flags.json,
  // model.log that are not regular files) to quarantine/: a publisher would
  // fail to rename over them for ever.
  void QuarantinePlanted(const EntryKey& id);
  // Hashes the open artifact and, for kAdopt, builds its record; verifies
  // it against `done` for kVerify.
  absl::StatusOr<StoredEntry> HashAndCheck(const EntryKey& id,
                                           RegularFile& artifact,
                                           const v1::DoneRecord* done,
                                           OnDamage on_damage);
  // Renames one file of `id`'s into quarantine/ beside a "{name}.reason"
  // file; returns where it went.
  absl::StatusOr<std::string> MoveFileToQuarantine(const EntryKey& id,
                                                   const std::string& path,
                                                   absl::string_view reason);

  StoreOptions options_;
  // Every filesystem call and clock reading goes through it. Mutable: const
  // methods read the filesystem too, and counting them is not a change.
  mutable CountingEnv env_;
  mutable std::atomic<uint64_t> quarantined_{0};
  // Shard directories whose names, up to the root, this store has fsynced
  // (step 1 of PublishFromFd's order); emptied when it reaches 65536.
  absl::Mutex synced_shards_mu_;
  absl::flat_hash_set<std::string> synced_shards_
      ABSL_GUARDED_BY(synced_shards_mu_);
};

}  // namespace neffd

#endif  // NEFFD_STORE_STORE_H_
