// neuron-alloc: inspect and exercise the Neuron caching allocator.
//
//   neuron-alloc round [--json] SIZE...
//   neuron-alloc config [--json]
//   neuron-alloc replay [--json] [--capacity BYTES] TRACE
//
// Exit status: 0 success, 1 runtime failure, 2 usage error or malformed trace.

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "allocator/allocator_config.h"
#include "allocator/rounding.h"
#include "allocator/segment_pool.h"
#include "allocator/segment_provider.h"
#include "allocator/trace.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"

ABSL_FLAG(bool, json, false, "print one JSON document instead of text");
ABSL_FLAG(uint64_t, capacity, 0,
          "replay: device capacity in bytes for the host-memory provider "
          "(0 = unlimited)");

namespace neffd::allocator {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

constexpr char kUsage[] =
    "inspect and exercise the Neuron caching allocator.\n"
    "  neuron-alloc round [--json] SIZE...   how each size is rounded and "
    "placed\n"
    "  neuron-alloc config [--json]          the configuration from "
    "TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG\n"
    "  neuron-alloc replay [--json] [--capacity BYTES] TRACE\n"
    "                                        replay an allocation trace "
    "('a <id> <bytes>', 'f <id>', 'e', '#')\n"
    "A SIZE of 0 is never placed: its pool and segment are \"none\". In "
    "JSON, byte counts above 2^53 are written as decimal strings so they stay "
    "exact.";

constexpr int kExitFailure = 1;
constexpr int kExitUsage = 2;

// JSON numbers are doubles; integers beyond 2^53 become strings.
Value IntValue(uint64_t v) {
  Value value;
  if (v <= (uint64_t{1} << 53)) {
    value.set_number_value(static_cast<double>(v));
  } else {
    value.set_string_value(absl::StrCat(v));
  }
  return value;
}

Value StringValue(absl::string_view s) {
  Value value;
  value.set_string_value(std::string(s));
  return value;
}

int PrintJson(const google::protobuf::Message& message) {
  std::string out;
  google::protobuf::util::JsonPrintOptions options;
  if (!google::protobuf::util::MessageToJsonString(message, &out, options)
           .ok()) {
    absl::FPrintF(stderr, "neuron-alloc: cannot format JSON\n");
    return kExitFailure;
  }
  absl::PrintF("%s\n", out.c_str());
  return 0;
}

int Usage(const std::string& problem) {
  absl::FPrintF(stderr, "neuron-alloc: %s\nusage: %s\n", problem.c_str(),
                kUsage);
  return kExitUsage;
}

int Round(const std::vector<char*>& args) {
  if (args.empty()) return Usage("round needs at least one SIZE");
  const SegmentAllocatorConfig& config = ProcessSegmentAllocatorConfig().config;
  std::vector<Placement> placements;
  for (const char* arg : args) {
    size_t bytes = 0;
    if (!ParseDecimalBytes(arg, &bytes)) {
      return Usage(absl::StrFormat(
          "SIZE '%s' is not a non-negative decimal integer of bytes", arg));
    }
    absl::StatusOr<Placement> p = PlaceRequest(config, bytes);
    if (!p.ok()) {
      absl::FPrintF(stderr, "neuron-alloc: %s\n",
                    std::string(p.status().message()).c_str());
      return kExitFailure;
    }
    placements.push_back(*p);
  }
  auto pool_name = [](const Placement& p) {
    return p.requested == 0 ? "none" : PoolKindName(p.pool);
  };
  auto segment_name = [](const Placement& p) {
    return p.requested == 0 ? "none" : SegmentKindName(p.segment);
  };
  if (absl::GetFlag(FLAGS_json)) {
    ListValue list;
    for (const Placement& p : placements) {
      Struct* s = list.add_values()->mutable_struct_value();
      auto& f = *s->mutable_fields();
      f["requested"] = IntValue(p.requested);
      f["rounded"] = IntValue(p.rounded);
      f["pool"] = StringValue(pool_name(p));
      f["segment"] = StringValue(segment_name(p));
      f["segment_bytes"] = IntValue(p.segment_bytes);
    }
    return PrintJson(list);
  }
  absl::PrintF("%-20s %-20s %-6s %-12s %s\n", "requested", "rounded", "pool",
               "segment", "segment_bytes");
  for (const Placement& p : placements) {
    absl::PrintF("%-20s %-20s %-6s %-12s %s\n", absl::StrCat(p.requested),
                 absl::StrCat(p.rounded), pool_name(p), segment_name(p),
                 absl::StrCat(p.segment_bytes));
  }
  return 0;
}

int Config(const std::vector<char*>& args) {
  if (!args.empty()) return Usage("config takes no arguments");
  const ParsedSegmentAllocatorConfig parsed =
      ParseSegmentAllocatorConfig(ReadSegmentAllocatorConfigEnv());
  const auto entries = SegmentAllocatorConfigEntries(parsed.config);
  if (absl::GetFlag(FLAGS_json)) {
    Struct doc;
    auto& fields = *doc.mutable_fields();
    auto& config = *fields["config"].mutable_struct_value()->mutable_fields();
    for (const auto& [key, value] : entries) config[key] = IntValue(value);
    ListValue* warnings = fields["warnings"].mutable_list_value();
    for (const std::string& w : parsed.warnings) {
      *warnings->add_values() = StringValue(w);
    }
    return PrintJson(doc);
  }
  for (const auto& [key, value] : entries) {
    absl::PrintF("%s=%s\n", key.c_str(), absl::StrCat(value).c_str());
  }
  for (const std::string& w : parsed.warnings) {
    absl::PrintF("warning: %s\n", w.c_str());
  }
  return 0;
}

int Replay(const std::vector<char*>& args) {
  if (args.size() != 1) return Usage("replay needs exactly one TRACE file");
  absl::StatusOr<Trace> trace = ReadTraceFile(args[0]);
  if (!trace.ok()) {
    absl::FPrintF(stderr, "neuron-alloc: %s\n",
                  std::string(trace.status().message()).c_str());
    return absl::IsInvalidArgument(trace.status()) ? kExitUsage : kExitFailure;
  }
  const uint64_t capacity = absl::GetFlag(FLAGS_capacity);
  HostMemoryProvider provider(capacity == 0 ? HostMemoryProvider::kUnlimited
                                            : capacity);
  absl::StatusOr<std::unique_ptr<NeuronSegmentPool>> pool =
      NeuronSegmentPool::CreateFromEnvironment(&provider);
  if (!pool.ok()) {
    absl::FPrintF(stderr, "neuron-alloc: %s\n",
                  std::string(pool.status().message()).c_str());
    return kExitFailure;
  }
  const ReplayResult result = ReplayTrace(*trace, **pool);
  const auto summary = ReplaySummary(result.stats);
  if (absl::GetFlag(FLAGS_json)) {
    Struct doc;
    auto& fields = *doc.mutable_fields();
    for (const auto& [key, value] : summary) {
      fields[key] = IntValue(static_cast<uint64_t>(value));
    }
    fields["ops_per_second"].set_number_value(result.ops_per_second());
    return PrintJson(doc);
  }
  for (const auto& [key, value] : summary) {
    absl::PrintF("%-22s %d\n", key, value);
  }
  absl::PrintF("%-22s %.0f\n", "ops_per_second", result.ops_per_second());
  return 0;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  absl::FlagsUsageConfig usage_config;
  usage_config.contains_help_flags = [](absl::string_view path) {
    return absl::StrContains(path, "neuron_alloc_main");
  };
  absl::SetFlagsUsageConfig(usage_config);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) return Usage("missing command");
  const std::string command = args[1];
  const std::vector<char*> rest(args.begin() + 2, args.end());
  if (command == "round") return Round(rest);
  if (command == "config") return Config(rest);
  if (command == "replay") return Replay(rest);
  return Usage(absl::StrFormat("unknown command '%s'", command));
}

}  // namespace
}  // namespace neffd::allocator

int main(int argc, char** argv) { return neffd::allocator::Main(argc, argv); }
