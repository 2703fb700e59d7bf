// daemon/tier/local_tier.h
//
// LocalTier is the host's read-through copy of the shared store on local disk
// ({TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR}/tier/). Without it every rank reads
// every NEFF from FSx (128 ranks x 200 MB per graph per host); with it each
// entry crosses the shared filesystem once per host and ranks read it from
// NVMe.
//
//   - Get() returns the local copy of an entry, filling it on first use: the
//     copy is hashed while it is written and installed (renamed into its
//     name) only if size and sha256 match the entry, so a tier file is
//     always verified.
//     Concurrent Gets of one entry share one fill.
//   - Files are named {ns}/{version}/{key}.{sha256}, so different content can
//     never alias and a file once named is never rewritten.
//   - The tier is bounded by `capacity_bytes`, evicting least recently handed
//     out files; a file handed out within `pin` is never evicted, so a rank
//     that got a path has that long to open it (once open, removal cannot
//     hurt it: the inode lives until closed).
//   - Tier files belong to the daemon (0440 in a 2750 directory: the ranks'
//     group reads them, nobody writes them). A staged file of another user
//     is never adopted: the tier gets the daemon's own copy of it, hashed
//     as it is copied. Each file's identity (inode, size, mtime, ctime) is
//     recorded when it is verified and compared (one lstat) at every
//     hand-out; a file whose identity changed is hashed again first.
//   - After a restart every file in the tier was complete when it got its
//     name, but a power loss may have torn it (tier files are never
//     fsynced: they are copies), so each is hashed once more before its
//     first hand-out; its size accounting is rebuilt by a background scan,
//     so start-up does not wait for it.
//
// Every filesystem call and clock reading goes through LocalTierOptions::env.
//
// Thread-safe.
#ifndef NEFFD_DAEMON_TIER_LOCAL_TIER_H_
#define NEFFD_DAEMON_TIER_LOCAL_TIER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "store/entry_id.h"
#include "store/env.h"
#include "store/store.h"

namespace neffd {

struct LocalTierOptions {
  std::string dir;              // {local_dir}/tier
  uint64_t capacity_bytes = 0;  // 0: 20% of the local filesystem
  absl::Duration pin = absl::Seconds(60);
  // The filesystem (the tier's and, to fill it, the shared store's) and the
  // clock; not owned.
  Env* env = Env::Default();
};

class LocalTier {
 public:
  static absl::StatusOr<std::unique_ptr<LocalTier>> Open(
      LocalTierOptions options);
  ~LocalTier();

  // `entry` with its path replaced by the verified local copy, filled from
  // entry.path() on first use. Errors: the shared copy is unreadable or does
  // not match entry.sha256 (DataLoss), or the local disk failed.
  // `from_shared`, if given, says whether this call had to wait for a copy
  // from the shared store (a shared-tier hit rather than a local one).
  absl::StatusOr<v1::Entry> Get(const EntryKey& id, const v1::Entry& entry,
                                bool* from_shared = nullptr);

  // A publish's staged file (`staged_fd`, open on `staged_path`, not yet
  // read) made the tier's verified copy of `*entry` in one pass over its
  // bytes, before the shared store has it, so the publisher's host never
  // reads the entry back from the shared store: the daemon's own file is
  // hashed in place and then renamed into the tier, and only the very file
  // that was hashed, while it has no other name (if the path now names
  // another file, swapped after it was opened, or the file has a second
  // hard link, nothing is adopted); another user's is copied into a file
  // of the daemon's, hashed as it is copied. With a `tee`, the
  // same pass writes every byte there too (the shared store's temp file:
  // Store::PublishWritten), so that copy needs no read of its own. An
  // empty entry->sha256() takes the digest of the bytes, whatever it is.
  // Returns a read-only descriptor of the tier copy (offset 0), remembered
  // as verified (store/digest.h RememberVerified) so that the store's copy
  // of it is made by the kernel and not hashed again; the caller forgets it
  // (ForgetVerified) once the store has its copy. Errors, and nothing is in
  // the tier: InvalidArgument if the bytes do not match the entry's size
  // and sha256 (the staged file is left for the caller), else the local
  // disk's error (the staged file may be gone; `staged_fd` still reads it).
  absl::StatusOr<UniqueFd> Ingest(const EntryKey& id, v1::Entry* entry,
                                  const std::string& staged_path, int staged_fd,
                                  const CopyTee& tee = {});

  // Drops every local copy of `id`.
  void Remove(const EntryKey& id);

  uint64_t capacity_bytes() const { return options_.capacity_bytes; }
  uint64_t used_bytes() const;
  // Bytes read from the shared store to fill the tier so far.
  uint64_t filled_bytes() const { return filled_bytes_; }

 private:
  struct File {
    std::string name;  // relative to dir
    uint64_t size = 0;
    absl::Time handed_out;
    bool verified = true;  // false: from before a restart, not hashed since
    // What the file was when it was verified; a change means someone
    // touched it, and it is hashed again before it is handed out.
    FileIdentity identity;
  };
  struct Filling;
  // Marks a name as being written into the tier by this process, from
  // before its rename until its Admit, for its lifetime.
  class Arrival;

  explicit LocalTier(LocalTierOptions options);
  std::string NameFor(const EntryKey& id, const std::string& sha256) const;
  // Copies the shared artifact into the tier as `name` (0440) if it
  // matches the entry.
  absl::Status Fill(const std::string& name, const v1::Entry& entry);
  // A hashed copy of `in_fd` (named `from`) in a fresh temp file beside
  // `path`, also written to `tee` if that names a file; the temp file is
  // the caller's to rename or remove.
  struct TempCopy {
    std::string tmp;
    CopyResult content;
  };
  absl::StatusOr<TempCopy> CopyToTemp(const std::string& path, int in_fd,
                                      const std::string& from,
                                      const CopyTee& tee = {});
  // Records `name` (handed out now, or never when `handed_out` is false);
  // a verified file's identity is read now.
  void Admit(const std::string& name, uint64_t size, bool handed_out,
             bool verified) ABSL_LOCKS_EXCLUDED(mu_);
  // Adds `file` to the accounting and the LRU (at the front if it was never
  // handed out), then evicts over capacity.
  void Insert(File file) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves `file` to the recent end of the LRU, handed out now.
  void MarkHandedOut(std::list<File>::iterator file)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the scanned file `name`, never handed out, if it is still there.
  void AdmitScanned(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  // Marks `name` handed out now; nullopt if the tier does not know it, else
  // whether it was verified since this process started and is still the
  // file that was verified.
  std::optional<bool> Touch(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  // The identity of the tier file `name` now (zero if it cannot be read).
  FileIdentity IdentityOf(const std::string& name) const;
  // Removes `name` from disk and from the accounting.
  void Drop(const std::string& name) ABSL_LOCKS_EXCLUDED(mu_);
  // True if the file `name` has entry's size and sha256.
  bool Matches(const std::string& name, const v1::Entry& entry) const;
  v1::Entry Localized(const v1::Entry& entry, const std::string& name) const;
  void EvictOverCapacity() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Renames the daemon's own verified staged file (`verified`: its fstat
  // when it was verified) into the tier as `name`, if it is still that
  // inode with no other name; removes it otherwise.
  bool AdoptOwn(const std::string& name, const v1::Entry& entry,
                const std::string& staged_path, int staged_fd,
                const struct stat& verified);
  // Admits the files under `rel` (relative to dir; "" for dir itself).
  void Scan(const std::string& rel);

  LocalTierOptions options_;
  std::atomic<uint64_t> filled_bytes_{0};
  mutable absl::Mutex mu_;
  // LRU by hand-out time: front is the least recent.
  std::list<File> lru_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, std::list<File>::iterator> files_
      ABSL_GUARDED_BY(mu_);
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<std::string, std::shared_ptr<Filling>> fills_
      ABSL_GUARDED_BY(mu_);
  // Names with an Arrival (a count: a fill and an adoption may overlap):
  // the start-up scan must not record them as files from before the start,
  // never handed out and so the first to be evicted.
  absl::flat_hash_map<std::string, int> arriving_ ABSL_GUARDED_BY(mu_);
  EnvThread scanner_;
};

// True when `tier` exists and keeps entries of `id`'s namespace (neff only:
// hlo entries are small and read once).
bool TierServes(const LocalTier* tier, const EntryKey& id);

// `entry` as a rank should get it: from the tier when TierServes and the
// local copy can be had, else as it is (the shared store's path).
v1::Entry ServeLocally(LocalTier* tier, const EntryKey& id,
                       const v1::Entry& entry);

}  // namespace neffd

#endif  // NEFFD_DAEMON_TIER_LOCAL_TIER_H_
