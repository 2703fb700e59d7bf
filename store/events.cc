#include "store/events.h"

#include <unistd.h>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace neffd {

void StderrEventSink(const StoreEvent& event) {
  std::string line = absl::StrCat("neffd: ", event.name);
  for (const auto& [key, value] : event.fields) {
    const bool quote = value.empty() || absl::StrContains(value, ' ') ||
                       absl::StrContains(value, '"');
    absl::StrAppend(
        &line, " ", key, "=",
        quote ? absl::StrCat("\"", absl::CEscape(value), "\"") : value);
  }
  line.push_back('\n');
  // One write: lines of concurrent threads never interleave.
  (void)!write(STDERR_FILENO, line.data(), line.size());
}

}  // namespace neffd
