// daemon/locks/wake_notices.h
//
// WakeNotices: the wake notices (store/wake_notice.h) that Lock callers the
// table parks wait on instead of a parked gRPC call, in {local_dir}/wake,
// which only the daemon writes and the ranks' group reads. A key has at most
// one open notice: the first caller parked on it creates it, later ones join
// it. The key's first answer (READY, FAILED, or empty: ask again) is written
// to the open notice, waking everyone on it at once, and closes it; a caller
// parked after that gets a new one. An answered notice's file stays at
// least `keep_answered` (it goes at the first answer after that, or once
// 1024 newer ones were answered), so that a rank
// that was told PARKED but opens it late still reads its answer instead of
// asking again (which would count its lookup twice); an answered notice
// holds no descriptor, and its file is removed once that has passed and
// nobody else holds it.
//
// Thread-safe.
#ifndef NEFFD_DAEMON_LOCKS_WAKE_NOTICES_H_
#define NEFFD_DAEMON_LOCKS_WAKE_NOTICES_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "store/entry_id.h"
#include "store/env.h"
#include "store/wake_notice.h"

namespace neffd {

class WakeNotices {
 public:
  using Notice = std::shared_ptr<WakeNotice>;

  // Notices are created in `dir` (which exists) through `env` (and its
  // clock).
  WakeNotices(Env* env, std::string dir,
              absl::Duration keep_answered = absl::Seconds(30));

  // Removes what an earlier daemon left in the directory: its waiters found
  // the notices unlocked and asked again.
  absl::Status RemoveLeftovers();

  // The key's open notice, or a new one.
  absl::StatusOr<Notice> Join(const EntryKey& id);

  // Answers `notice` (the first answer wins) and closes it for `id`.
  void Answer(const EntryKey& id, const Notice& notice,
              absl::string_view answer);

 private:
  Env* const env_;
  const std::string dir_;
  const absl::Duration keep_answered_;
  absl::Mutex mu_;
  absl::flat_hash_map<std::string, Notice> open_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<absl::Time, Notice>> answered_ ABSL_GUARDED_BY(mu_);
  uint64_t created_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace neffd

#endif  // NEFFD_DAEMON_LOCKS_WAKE_NOTICES_H_
