// `neffctl stats`: the rows that neffd.proto's StatMetric declares on the
// fields of Stats and of the messages it holds (proto/stat_fields.h), in
// declaration order, then the index's totals by compiler version. A field
// added to Stats with a `row` is shown here without a change to this file.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/neffctl/ctl.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "proto/stat_fields.h"

namespace neffd::ctl {
namespace {

using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using Row = std::vector<std::string>;  // label, value, note

bool IsZero(const Message& m, const FieldDescriptor* f) {
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_STRING) {
    return m.GetReflection()->GetString(m, f).empty();
  }
  const std::optional<double> value = ScaledStat(m, f);
  return value && *value == 0;
}

// The field's value as its declaration says to show it.
std::string Shown(const Message& m, const FieldDescriptor* f,
                  const v1::StatMetric& metric) {
  const google::protobuf::Reflection* r = m.GetReflection();
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_STRING: {
      std::string text = r->GetString(m, f);
      return text.empty() ? "none" : text;
    }
    case FieldDescriptor::CPPTYPE_BOOL:
      return r->GetBool(m, f) ? "yes" : "no";
    default:
      break;
  }
  switch (metric.show()) {
    case v1::StatMetric::BYTES:
      return HumanBytes(static_cast<uint64_t>(ScaledStat(m, f).value_or(0)));
    case v1::StatMetric::DURATION:
      return HumanDuration(absl::Seconds(ScaledStat(m, f).value_or(0)));
    case v1::StatMetric::AGO:
      return Ago(static_cast<int64_t>(ScaledStat(m, f).value_or(0)));
    default:
      break;
  }
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_UINT64:
      return absl::StrCat(r->GetUInt64(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return absl::StrCat(r->GetInt64(m, f));
    default:
      return absl::StrFormat("%g", ScaledStat(m, f).value_or(0));
  }
}

// "(12.5%)" of the field `percent_of` names, when it is not 0.
std::string PercentNote(const Message& m, const FieldDescriptor* f,
                        const v1::StatMetric& metric) {
  if (metric.percent_of().empty()) return "";
  const FieldDescriptor* whole_field =
      m.GetDescriptor()->FindFieldByName(metric.percent_of());
  if (whole_field == nullptr) return "";
  const double whole = ScaledStat(m, whole_field).value_or(0);
  if (whole == 0) return "";
  return absl::StrFormat("(%.1f%%)",
                         100.0 * ScaledStat(m, f).value_or(0) / whole);
}

void AddRows(const Message& m, const v1::Stats& stats, std::vector<Row>& rows) {
  const google::protobuf::Descriptor* d = m.GetDescriptor();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
      if (!f->is_repeated()) {
        AddRows(m.GetReflection()->GetMessage(m, f), stats, rows);
      }
      continue;
    }
    const v1::StatMetric& metric = StatMetricOf(f);
    if (metric.row().empty() && metric.place() == v1::StatMetric::ROW) {
      continue;
    }
    if (!StatSectionShown(stats, metric.section())) continue;
    if (metric.omit_zero() && IsZero(m, f)) continue;
    const std::string value = Shown(m, f, metric);
    if (metric.place() == v1::StatMetric::ROW || rows.empty()) {
      rows.push_back({metric.row(), value, PercentNote(m, f, metric)});
    } else if (metric.place() == v1::StatMetric::JOINED) {
      absl::StrAppend(&rows.back()[1], " / ", value);
    } else if (metric.place() == v1::StatMetric::NAMED_NOTE) {
      std::string& note = rows.back()[2];
      absl::StrAppend(&note, note.empty() ? "" : " ", metric.row(), "=", value);
    } else {
      std::string& note = rows.back()[2];
      absl::StrAppend(&note, note.empty() ? "" : ", ", value,
                      metric.row().empty() ? "" : " ", metric.row());
    }
  }
}

}  // namespace

void PrintStats(const v1::Stats& s, const std::string& address) {
  std::printf("neffd at %s, up %s; counting since %s%s\n", address.c_str(),
              HumanDuration(absl::Milliseconds(s.uptime_ms())).c_str(),
              Ago(s.counting_since_unix_ms()).c_str(),
              s.draining() ? "; DRAINING (no new leases)" : "");
  std::vector<Row> rows;
  AddRows(s, s, rows);
  PrintTable(rows, {1});
  if (s.versions_size() == 0) return;
  std::vector<Row> versions = {{"  NAMESPACE", "COMPILER", "ENTRIES", "SIZE"}};
  for (const v1::VersionStats& v : s.versions()) {
    versions.push_back({"  " + v.namespace_(), v.compiler_version(),
                        absl::StrCat(v.entries()), HumanBytes(v.bytes())});
  }
  PrintTable(versions, {2, 3});
}

}  // namespace neffd::ctl
