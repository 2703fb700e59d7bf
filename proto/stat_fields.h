// proto/stat_fields.h
//
// The fields of neffd.v1.Stats as neffd.proto's StatMetric option declares
// them, read through protobuf reflection: the one list that the daemon's
// Prometheus exposition (daemon/telemetry) and `neffctl stats`
// (client/neffctl/stats_table.cc) both walk. A field added to Stats with its
// StatMetric is a series, a row, or both; no view spells it out again.
//
// Both the client and the daemon depend on this library, so it depends on
// the wire messages only. Thread-safe (pure functions of their arguments).
#ifndef NEFFD_PROTO_STAT_FIELDS_H_
#define NEFFD_PROTO_STAT_FIELDS_H_

#include <optional>

#include "absl/strings/string_view.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "proto/neffd/v1/neffd.pb.h"

namespace neffd {

// The field's declaration (all defaults when it has none).
inline const v1::StatMetric& StatMetricOf(
    const google::protobuf::FieldDescriptor* field) {
  return field->options().GetExtension(v1::metric);
}

// Whether `stats` has the part the fields of `section` describe: "" always,
// "remote" with the S3 tier, "etcd" with --coordinator=etcd.
inline bool StatSectionShown(const v1::Stats& stats,
                             absl::string_view section) {
  if (section == "remote") return !stats.remote().empty();
  if (section == "etcd") return stats.coordinator() == "etcd";
  return section.empty();
}

// A singular number or bool (0 or 1) of `message`, times its declared scale;
// nullopt for text, messages and repeated fields.
inline std::optional<double> ScaledStat(
    const google::protobuf::Message& message,
    const google::protobuf::FieldDescriptor* field) {
  if (field->is_repeated()) return std::nullopt;
  const google::protobuf::Reflection* r = message.GetReflection();
  double value = 0;
  switch (field->cpp_type()) {
    case google::protobuf::FieldDescriptor::CPPTYPE_UINT64:
      value = static_cast<double>(r->GetUInt64(message, field));
      break;
    case google::protobuf::FieldDescriptor::CPPTYPE_INT64:
      value = static_cast<double>(r->GetInt64(message, field));
      break;
    case google::protobuf::FieldDescriptor::CPPTYPE_DOUBLE:
      value = r->GetDouble(message, field);
      break;
    case google::protobuf::FieldDescriptor::CPPTYPE_BOOL:
      value = r->GetBool(message, field) ? 1 : 0;
      break;
    default:
      return std::nullopt;
  }
  const double scale = StatMetricOf(field).scale();
  return scale == 0 ? value : value * scale;
}

}  // namespace neffd

#endif  // NEFFD_PROTO_STAT_FIELDS_H_
