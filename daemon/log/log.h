// daemon/log/log.h
//
// neffd's event log: one line per event on stderr, in logfmt —
//   2026-12-02T10:05:00.123Z level=info event=started address=unix:/run/...
// `event` is a short snake_case name; fields follow as key=value, values with
// spaces, quotes or '=' are double-quoted with C escapes. Under systemd
// (JOURNAL_STREAM is set) the timestamp is left to journald and each line
// starts with a syslog priority prefix ("<3>" error, "<4>" warning, "<6>"
// info, "<7>" debug) so journald records the severity.
//
// Verbosity follows TORCH_NEURONX_LOG_LEVEL: 0 error, 1 warning (default),
// 2 info, 3 debug. Events above the verbosity are dropped cheaply.
//
// Thread-safe: each line is written with one write(2), so lines from
// different threads never interleave. Configure() may be called at any time
// (SIGHUP changes the verbosity).
#ifndef NEFFD_DAEMON_LOG_LOG_H_
#define NEFFD_DAEMON_LOG_LOG_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"

namespace neffd::log {

enum class Level { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

// One key=value pair. Numbers and bools are formatted for you.
struct Field {
  Field(const char* k, absl::string_view v) : key(k), value(v) {}
  Field(const char* k, const std::string& v) : key(k), value(v) {}
  Field(const char* k, const char* v) : key(k), value(v) {}
  Field(const char* k, int64_t v);
  Field(const char* k, uint64_t v);
  Field(const char* k, int v) : Field(k, static_cast<int64_t>(v)) {}
  Field(const char* k, double v);
  Field(const char* k, bool v) : key(k), value(v ? "true" : "false") {}
  const char* key;
  std::string value;
};

// `verbosity` is clamped to [0, 3]. `journal` selects the journald form.
void Configure(int verbosity, bool journal);
int Verbosity();
// True when configured for journald.
bool UnderJournal();
bool Enabled(Level level);

// The line Event() writes, without the trailing newline (for tests).
std::string Format(Level level, absl::string_view event,
                   std::initializer_list<Field> fields);

void Event(Level level, absl::string_view event,
           std::initializer_list<Field> fields = {});

// The same for events whose fields are known only at run time (the store
// library's, store/events.h).
void EventWithFields(
    Level level, absl::string_view event,
    const std::vector<std::pair<std::string, std::string>>& fields);

inline void Error(absl::string_view event,
                  std::initializer_list<Field> fields = {}) {
  Event(Level::kError, event, fields);
}
inline void Warning(absl::string_view event,
                    std::initializer_list<Field> fields = {}) {
  Event(Level::kWarning, event, fields);
}
inline void Info(absl::string_view event,
                 std::initializer_list<Field> fields = {}) {
  Event(Level::kInfo, event, fields);
}
inline void Debug(absl::string_view event,
                  std::initializer_list<Field> fields = {}) {
  Event(Level::kDebug, event, fields);
}

}  // namespace neffd::log

#endif  // NEFFD_DAEMON_LOG_LOG_H_
