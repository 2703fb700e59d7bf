// client/workdir.h
//
// WorkDir is the compiler's working directory for one entry, in the spec's
// artifact hierarchy:
//
//   {TORCH_NEURONX_DEBUG_DIR}/neuronx-cc/{key}/   (neff namespace)
//   {TORCH_NEURONX_DEBUG_DIR}/hlo/{key}/          (hlo namespace)
//       module.neff | module.hlo.pb   the output compile_fn writes
//       log-neuron-cc.txt, compiler_args.txt, metadata.txt, ...
//       .neffd-complete               "ns version key size xxh3:{hex}":
//                                     the output is whole (written when a
//                                     lease ends before it was published)
//
// A process owns the directory while it holds an exclusive flock on it, so
// on one host at most one compile of a key runs in it, whichever way the key
// lock was obtained (daemon lease, fallback flock, or a lease that outlived
// its daemon). A new owner either adopts a complete output left behind (a
// holder that compiled but could not publish) or clears the directory (a
// holder killed mid-compile leaves a partial output; it is removed here).
// A compile that does not hold the key's lock (the cache is disabled, or the
// lock wait ran out) uses a private directory, {key}.{pid}.{n}, instead: its
// output may be returned uncached and must not be cleared by the next owner.
//
// Not thread-safe per object; a WorkDir is a move-only value. The lock is
// released on destruction; the files stay unless Remove() was called.
#ifndef NEFFD_CLIENT_WORKDIR_H_
#define NEFFD_CLIENT_WORKDIR_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "client/file_lock.h"
#include "store/digest.h"
#include "store/entry_id.h"
#include "store/env.h"

namespace neffd {

class WorkDir {
 public:
  WorkDir(WorkDir&&) = default;
  WorkDir& operator=(WorkDir&&) = default;

  // "{debug_dir}/neuronx-cc" or "{debug_dir}/hlo".
  static std::string BaseFor(const std::string& debug_dir, Namespace ns);

  // Claims the shared directory of `id`, waiting until `deadline` while
  // another process owns it. DeadlineExceeded if it stayed owned.
  static absl::StatusOr<WorkDir> Claim(const std::string& debug_dir,
                                       const EntryKey& id, absl::Time deadline,
                                       Env* env);
  // A new directory of this process's own, {key}.{pid}.{n}, for a compile
  // whose output may be returned uncached: nobody else will clear it.
  static absl::StatusOr<WorkDir> Private(const std::string& debug_dir,
                                         const EntryKey& id);

  const std::string& path() const { return path_; }
  // Claim found the directory there already: another process had it (and
  // may have published the entry, or left an output to adopt, meanwhile).
  bool inherited() const { return inherited_; }
  // path()/module.neff or path()/module.hlo.pb
  const std::string& output_path() const { return output_; }
  bool is_private() const { return private_; }

  // The size (and, from an older client's marker, the sha256; else empty)
  // of a whole output for `id` left by an earlier owner, or nullopt (no
  // marker, a marker for another entry, or an output that no longer
  // matches it).
  std::optional<CopyResult> CompleteOutput(const EntryKey& id) const;

  // The last 1 MiB of log-neuron-cc.txt; empty if there is none.
  std::string CompilerLogTail() const;

  // Removes everything inside the directory.
  absl::Status Clear();

  // The output's size, with an empty sha256 (the daemon or the store
  // computes that as it copies). FailedPrecondition if compile_fn left no
  // regular file at output_path().
  absl::StatusOr<CopyResult> Output() const;
  // As Output(), and records that the output is whole, fingerprinted
  // (XXH3-128), for the next holder of the key: called when a lease ends
  // before its output was published, not on every compile (a pass over a
  // large NEFF that a publish that succeeds does not need).
  absl::StatusOr<CopyResult> MarkComplete(const EntryKey& id);
  // Removes the marker (the output has been published).
  void Unmark();

  // Removes the directory and everything in it, then releases it.
  void Remove();

 private:
  WorkDir(std::string path, Namespace ns, FileLock lock, bool is_private);
  absl::StatusOr<UniqueFd> OpenOutput(struct stat* st) const;

  std::string path_;
  std::string output_;
  FileLock lock_;
  bool private_ = false;
  bool inherited_ = false;
};

}  // namespace neffd

#endif  // NEFFD_CLIENT_WORKDIR_H_
