// daemon/cluster/access_journal.h
//
// An AccessJournal is one host's record, on a shared store, of which entries
// it served and when, so that the store's single evictor can order victims by
// the most recent use on any host (docs/ARCHITECTURE.md, "Cluster gc").
//
// Contract:
//  - Note() takes the access times the Catalog flushes; it
//    touches memory only. A use is news when the entry is not in the journal
//    or its recorded use is at least `grain` older.
//  - Flush() rewrites {root}/.access/{host_id} by temp file and rename when
//    there is news and the previous rewrite is at least `min_spacing` old;
//    otherwise it touches nothing on the store. The file is the compacted map
//    of every entry this host served within `horizon`, one line each:
//    "{unix_seconds} {compiler_version} {key}". It is not fsynced: a journal
//    lost to a power loss makes entries look colder until the next rewrite.
//  - Hence a journal's time for an entry lags its last use on that host by
//    at most lag() = grain + min_spacing + the Catalog's flush period; a
//    reader that protects "recently served" entries widens its window by it.
//    A host's first use of an entry reaches its journal within min_spacing
//    + the flush period: --gc_recent_seconds must exceed that (20 s by
//    default, against 60 s) for such a use to protect the entry.
//  - ReadAll() lists {root}/.access once and reads each host's journal once,
//    returning the latest use of each entry on any host. Times are the
//    writers' wall clocks: hosts are assumed NTP-synchronised to well within
//    --gc_recent_seconds.
//
// Thread-safe.
#ifndef NEFFD_DAEMON_CLUSTER_ACCESS_JOURNAL_H_
#define NEFFD_DAEMON_CLUSTER_ACCESS_JOURNAL_H_

#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/entry_id.h"
#include "store/env.h"

namespace neffd {

struct AccessJournalOptions {
  std::string root;  // the store's root
  Namespace ns = Namespace::kNeff;
  std::string host_id;
  absl::Duration grain = absl::Minutes(10);
  absl::Duration min_spacing = absl::Seconds(10);
  absl::Duration horizon = absl::Hours(24 * 14);
  // How often the Catalog hands over access times (Note's caller).
  absl::Duration catalog_flush = absl::Seconds(10);
  // The shared store's filesystem; not owned. The daemon passes the
  // CountingEnv whose calls it reports as store metadata operations.
  Env* env = Env::Default();
};

// The latest use of each entry on any host, by "{compiler_version}/{key}".
using LastUses = absl::flat_hash_map<std::string, absl::Time>;

class AccessJournal {
 public:
  explicit AccessJournal(AccessJournalOptions options);

  // Access times by EntryKey::Canonical(); entries of other namespaces are
  // ignored.
  void Note(const absl::flat_hash_map<std::string, absl::Time>& accessed);

  // Rewrites this host's journal if there is news and min_spacing allows
  // (or, with `force`, whenever there is news: at shutdown).
  absl::Status Flush(absl::Time now, bool force = false);

  absl::Duration lag() const;
  std::string path() const;

  // Every other host's journal under `root` (not `self`'s: a host knows
  // its own uses exactly), read through `env` and merged; `journals` is set
  // to the number read.
  static LastUses ReadAll(const std::string& root, const std::string& self,
                          uint64_t* journals, Env* env);
  // The LastUses key of `id`.
  static std::string KeyOf(const EntryKey& id);

 private:
  const AccessJournalOptions options_;
  absl::Mutex mu_;
  LastUses journaled_ ABSL_GUARDED_BY(mu_);
  bool news_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time last_write_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_CLUSTER_ACCESS_JOURNAL_H_
