// store/done_record.h
//
// model.done holds an entry's DoneRecord (size, sha256, producer, time) as
// JSON with the proto field names. The file is read from the shared store,
// which other hosts and tools write, so ParseDoneRecord treats it as
// untrusted text: it never crashes or allocates without bound, and anything
// that is not a JSON DoneRecord is InvalidArgument (the caller quarantines
// the entry). Unknown fields are ignored so newer daemons can add fields.
//
// An empty model.done is libneuronxla's legacy marker; the caller handles it
// before parsing (it is not a JSON object).
//
// Thread-safe.
#ifndef NEFFD_STORE_DONE_RECORD_H_
#define NEFFD_STORE_DONE_RECORD_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/neffd/v1/records.pb.h"

namespace neffd {

// The metadata key under which the client library records how long the
// entry's compile took, in milliseconds (gc removes cheap entries first).
inline constexpr char kCompileMsMetadata[] = "compile_ms";

// The record in `text`, or InvalidArgument "model.done is not valid JSON".
absl::StatusOr<v1::DoneRecord> ParseDoneRecord(absl::string_view text);

// The JSON that ParseDoneRecord reads back to `done`.
absl::StatusOr<std::string> DoneRecordToJson(const v1::DoneRecord& done);

}  // namespace neffd

#endif  // NEFFD_STORE_DONE_RECORD_H_
