// Fuzzes ParseDoneRecord: model.done comes from a shared directory that
// other hosts write. A record that parses must survive a write/read round
// trip unchanged.
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "google/protobuf/util/message_differencer.h"
#include "store/done_record.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<neffd::v1::DoneRecord> done = neffd::ParseDoneRecord(text);
  if (!done.ok()) return 0;
  absl::StatusOr<std::string> json = neffd::DoneRecordToJson(*done);
  if (!json.ok()) return 0;  // e.g. invalid UTF-8 kept in a string field
  absl::StatusOr<neffd::v1::DoneRecord> again = neffd::ParseDoneRecord(*json);
  if (!again.ok() ||
      !google::protobuf::util::MessageDifferencer::Equals(*done, *again)) {
    std::abort();
  }
  return 0;
}
