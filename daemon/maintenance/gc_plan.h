// daemon/maintenance/gc_plan.h
//
// Which entries a gc run removes, decided from what was listed, without
// touching the store: PlanGc is a pure function of its inputs (the
// compile-cost lookup aside, which it calls only for the buckets it
// reaches), so the victim order is unit-tested on its own.
//
// The order (docs/ARCHITECTURE.md, "Cluster gc"):
//   - least recently used first, by the latest use known: this host's own
//     serve, another host's journaled use, else the publish time;
//   - uses within one `grain` are equally cold (the journals cannot tell
//     them apart); among them the cheapest to recompile goes first, an
//     unknown cost counting as the dearest;
//   - a bucket is reached only while the store is over `max_size_bytes`
//     (0: no size goal) or its entries were last used before `cutoff`;
//   - an entry whose lease is out (here or by a lock file) is never
//     removed, nor one used within `recent` of `now` here, or within
//     `recent` + `lag` by a journal (a journaled time may lag its use).
#ifndef NEFFD_DAEMON_MAINTENANCE_GC_PLAN_H_
#define NEFFD_DAEMON_MAINTENANCE_GC_PLAN_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/time/time.h"
#include "proto/neffd/v1/neffd.pb.h"
#include "store/entry_id.h"

namespace neffd {

struct GcCandidate {
  EntryKey id;
  uint64_t size = 0;
  absl::Time last_use;
  v1::GcRemoval::LastUseSource source = v1::GcRemoval::PUBLISHED;
  bool leased = false;
  absl::Time journaled = absl::InfinitePast();  // by another host
  int64_t compile_ms = -1;  // filled by PlanGc for the buckets it reaches
};

struct GcGoals {
  uint64_t max_size_bytes = 0;               // 0: no size goal
  absl::Time cutoff = absl::InfinitePast();  // remove uses before this
  absl::Time now;
  absl::Duration recent;
  absl::Duration lag;
  absl::Duration grain;
};

struct GcVictim {
  size_t candidate;  // index into the sorted candidates
  v1::GcRemoval::Reason reason;
};

struct GcPlan {
  std::vector<GcVictim> victims;  // in removal order
  uint64_t bytes_before = 0;
  uint64_t skipped_leased = 0;
  uint64_t skipped_recent = 0;
};

// Sorts `candidates` (least recently used first) and returns the victims
// in the order they are to be removed. `compile_ms` gives an entry's
// compile time in milliseconds, or -1 if unknown.
GcPlan PlanGc(std::vector<GcCandidate>& candidates, const GcGoals& goals,
              const std::function<int64_t(const EntryKey&)>& compile_ms);

}  // namespace neffd

#endif  // NEFFD_DAEMON_MAINTENANCE_GC_PLAN_H_
