#include "daemon/log/log.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace neffd::log {
namespace {

std::atomic<int> verbosity{1};
std::atomic<bool> journal{false};

constexpr const char* kNames[] = {"error", "warning", "info", "debug"};
constexpr int kSyslog[] = {3, 4, 6, 7};

bool NeedsQuotes(absl::string_view v) {
  if (v.empty()) return true;
  return std::any_of(v.begin(), v.end(), [](char c) {
    return c == ' ' || c == '"' || c == '=' || c == '\\' ||
           static_cast<unsigned char>(c) < 0x20;
  });
}

}  // namespace

Field::Field(const char* k, int64_t v) : key(k), value(absl::StrCat(v)) {}
Field::Field(const char* k, uint64_t v) : key(k), value(absl::StrCat(v)) {}
Field::Field(const char* k, double v)
    : key(k), value(absl::StrFormat("%g", v)) {}

void Configure(int level, bool under_journal) {
  verbosity.store(std::clamp(level, 0, 3));
  journal.store(under_journal);
}

int Verbosity() { return verbosity.load(); }

bool UnderJournal() { return journal.load(); }

bool Enabled(Level level) { return static_cast<int>(level) <= Verbosity(); }

namespace {

absl::string_view Key(const Field& f) { return f.key; }
absl::string_view Value(const Field& f) { return f.value; }
absl::string_view Key(const std::pair<std::string, std::string>& f) {
  return f.first;
}
absl::string_view Value(const std::pair<std::string, std::string>& f) {
  return f.second;
}

template <typename Fields>
std::string FormatLine(Level level, absl::string_view event,
                       const Fields& fields) {
  const int l = static_cast<int>(level);
  std::string line =
      journal.load()
          ? absl::StrCat("<", kSyslog[l], ">")
          : absl::StrCat(absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(),
                                          absl::UTCTimeZone()),
                         " ");
  absl::StrAppend(&line, "level=", kNames[l], " event=", event);
  for (const auto& f : fields) {
    absl::StrAppend(&line, " ", Key(f), "=");
    if (NeedsQuotes(Value(f))) {
      absl::StrAppend(&line, "\"", absl::CEscape(Value(f)), "\"");
    } else {
      absl::StrAppend(&line, Value(f));
    }
  }
  return line;
}

void Write(std::string line) {
  line.push_back('\n');
  // One write per line: lines of concurrent threads never interleave.
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace

std::string Format(Level level, absl::string_view event,
                   std::initializer_list<Field> fields) {
  return FormatLine(level, event, fields);
}

void Event(Level level, absl::string_view event,
           std::initializer_list<Field> fields) {
  if (Enabled(level)) Write(FormatLine(level, event, fields));
}

void EventWithFields(
    Level level, absl::string_view event,
    const std::vector<std::pair<std::string, std::string>>& fields) {
  if (Enabled(level)) Write(FormatLine(level, event, fields));
}

}  // namespace neffd::log
