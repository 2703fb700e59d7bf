// store/events.h
//
// The store library never logs by itself: what an operator should hear about
// (an entry found damaged and moved aside, a stale lease broken) is handed to
// the EventSink its owner injects, so the daemon writes it in its own log
// format and a rank in the format of the framework it runs in. An event is a
// snake_case name and key=value fields, in the order they were given.
//
// A sink may be called from any thread that calls into the store, and must
// be thread-safe.
#ifndef NEFFD_STORE_EVENTS_H_
#define NEFFD_STORE_EVENTS_H_

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace neffd {

struct StoreEvent {
  std::string name;  // e.g. "entry_quarantined"
  std::vector<std::pair<std::string, std::string>> fields;
};

using EventSink = std::function<void(const StoreEvent&)>;

// "neffd: entry_quarantined entry=... reason=..." on stderr in one write: the
// sink of processes that inject none (ranks, neffctl).
void StderrEventSink(const StoreEvent& event);

}  // namespace neffd

#endif  // NEFFD_STORE_EVENTS_H_
