#include "store/done_record.h"

#include "absl/status/status.h"
#include "google/protobuf/util/json_util.h"

namespace neffd {

absl::StatusOr<v1::DoneRecord> ParseDoneRecord(absl::string_view text) {
  google::protobuf::util::JsonParseOptions parse;
  parse.ignore_unknown_fields = true;
  v1::DoneRecord done;
  if (!google::protobuf::util::JsonStringToMessage(
           google::protobuf::StringPiece(text.data(), text.size()), &done,
           parse)
           .ok()) {
    return absl::InvalidArgumentError("model.done is not valid JSON");
  }
  return done;
}

absl::StatusOr<std::string> DoneRecordToJson(const v1::DoneRecord& done) {
  std::string json;
  google::protobuf::util::JsonPrintOptions print;
  print.preserve_proto_field_names = true;
  if (!google::protobuf::util::MessageToJsonString(done, &json, print).ok()) {
    return absl::InternalError("serialising model.done");
  }
  return json;
}

}  // namespace neffd
