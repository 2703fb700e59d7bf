#include "config/render.h"

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "config/env.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/io/zero_copy_stream_impl_lite.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/type_resolver.h"
#include "google/protobuf/util/type_resolver_util.h"

namespace neffd::config {
namespace {

using google::protobuf::ListValue;
using google::protobuf::NullValue;
using google::protobuf::Struct;
using google::protobuf::Value;

// The value as a table cell: "" for the empty string.
std::string Cell(const EnvSnapshot& snapshot, const VarSpec& spec) {
  std::string text = snapshot.FormatValue(spec.name);
  return text.empty() ? "\"\"" : text;
}

Value TypedValue(const EnvSnapshot& snapshot, const VarSpec& spec) {
  Value value;
  if (!snapshot.IsSet(spec.name)) {
    value.set_null_value(NullValue::NULL_VALUE);
    return value;
  }
  switch (spec.type) {
    case Type::kBool:
      value.set_bool_value(snapshot.GetBool(spec.name));
      break;
    case Type::kInt:
      value.set_number_value(static_cast<double>(snapshot.GetInt(spec.name)));
      break;
    case Type::kString:
    case Type::kPath:
      value.set_string_value(snapshot.GetString(spec.name));
      break;
    case Type::kIntList: {
      ListValue* list = value.mutable_list_value();
      for (int64_t i : snapshot.GetIntList(spec.name)) {
        list->add_values()->set_number_value(static_cast<double>(i));
      }
      break;
    }
    case Type::kStringList: {
      ListValue* list = value.mutable_list_value();
      for (const std::string& s : snapshot.GetStringList(spec.name)) {
        list->add_values()->set_string_value(s);
      }
      break;
    }
  }
  return value;
}

// Greedy word wrap of `text` to `width` columns, each line after `indent`.
std::string Wrap(absl::string_view text, size_t width,
                 absl::string_view indent) {
  std::string out;
  size_t column = 0;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (column > 0 && column + 1 + word.size() > width) {
      absl::StrAppend(&out, "\n");
      column = 0;
    }
    absl::StrAppend(&out, column == 0 ? indent : " ", word);
    column += (column == 0 ? indent.size() : 1) + word.size();
  }
  return out;
}

std::string MarkdownCell(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"|", "\\|"}});
}

constexpr absl::string_view kMarkdownHeader = R"(# Configuration

<!-- Generated from config/registry.cc by
     bazel run //config:neuronx-env -- --markdown > docs/CONFIG.md
     Do not edit by hand: //config:config_doc_test fails when this file is
     stale. -->

Every environment variable that neffd, its client library (libneffclient,
neffctl, neffcc), the Neuron allocator and torch-neuronx read is listed here,
with its type, default, validation and the components that read it. The
registry in `config/registry.cc` is the only parser of these variables: the
daemon and the client read their settings through `config/env.h` and nowhere
else. The specification is `torch-neuronx-env-vars.rst`; `NEFFD_ADDRESS`, `RANK` and
neffcc's `NEFFD_*` switches are added for neffd.

## How values are read

- **bool**: `1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off`, in any case.
  `TORCH_NEURONX_ENABLE_STREAMS` accepts only `0` and `1`.
  `NEURON_USE_SPLIT_ALLGATHER` and `NEURON_USE_SPLIT_REDUCE_SCATTER`: when set,
  only `1` enables and any other value disables, without a warning; when
  unset they are on for work on the default stream and off on other streams
  (with streams disabled every stream is the default stream).
- **int**: plain decimal digits (no sign, no spaces, no suffix), range-checked.
- **lists**: comma-separated; spaces around items are ignored, an empty
  item is an error, the empty string is the empty list. Integer lists are
  sorted and deduplicated; `TORCH_NEURONX_PROFILE_CAPTURE_NC` also takes
  ranges (`0,1,2-5` is 0 to 5).
- **str / path**: as given; the cache directories the daemon shares with the
  ranks must be absolute paths.
- A value that fails validation gives a warning that names the variable and
  the value, and the default is kept.
- `TORCH_NEURONX_ENABLE_HOST_CC=1` while `TORCH_NEURONX_ENABLE_STREAMS=0`
  gives a warning; host collectives stay off.
- A `TORCH_NEURONX_*`, `NEURON_*` or `NEFFD_*` variable that is not listed
  here but is within edit distance 2 of one that is gives the warning
  `unknown variable X; did you mean Y?`.

Each value has an **origin**: `default` (not set, the constant default),
`env` (set and valid), `derived` (computed from the host or process: user
name, uid, PyTorch version, EC2 instance type, or forced by another variable)
or `invalid` (set but rejected; the default is used).

**Read by**: `daemon` is neffd; `client` is libneffclient and neffctl;
`allocator` is the NeuronSegmentPool; `torch-neuronx` means torch-neuronx or
PyTorch itself reads it and neffd only shows it.

## What the cache directories hold

The NEFF and HLO caches are in TorchNeuron's own layout, so unmodified
TorchNeuron ranks and neffd share one store (docs/ARCHITECTURE.md, "On-disk
layout"): an entry is `{TORCH_NEURONX_NEFF_CACHE_DIR}/{k0k1}/{k2k3}/{key}.neff`
(`{key}.hlo` under `TORCH_NEURONX_HLO_CACHE_DIR`), the key a 32-hex
TorchNeuron key or a 64-hex neffd key; neffd's records of it (size, sha256,
producer, failure, cross-host lease) are in `{key}.neffd/` beside it, which
TorchNeuron's cache clear does not remove. The per-key compile lock is
`{TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR}/locks/{key}.lock`, the flock unmodified
ranks take too; the daemon holds it while one of its clients compiles the key.

## Showing the effective configuration

```
bazel run //config:neuronx-env                   # table; warnings on stderr
bazel run //config:neuronx-env -- --json         # typed values and origins
bazel run //config:neuronx-env -- --check        # exit 1 on any warning
bazel run //config:neuronx-env -- --explain TORCH_NEURONX_LOG_LEVEL
bazel run //config:neuronx-env -- --torch_version 2.13   # for the defaults
```
)";

}  // namespace

std::string RenderTable(const EnvSnapshot& snapshot) {
  constexpr size_t kOriginWidth = 9;  // "invalid" and two spaces
  size_t name_width = 4;
  size_t value_width = 5;
  for (const VarSpec& spec : Variables()) {
    name_width = std::max(name_width, absl::string_view(spec.name).size());
    value_width = std::max(value_width, Cell(snapshot, spec).size());
  }
  auto row = [&](absl::string_view name, absl::string_view value,
                 absl::string_view origin, absl::string_view note) {
    std::string line = absl::StrCat(
        name, std::string(name_width - name.size() + 2, ' '), value,
        std::string(value_width - value.size() + 2, ' '), origin);
    if (!note.empty()) {
      absl::StrAppend(&line, std::string(kOriginWidth - origin.size(), ' '),
                      note);
    }
    return absl::StrCat(line, "\n");
  };
  std::string out = row("NAME", "VALUE", "ORIGIN", "NOTE");
  for (const VarSpec& spec : Variables()) {
    absl::StrAppend(&out, row(spec.name, Cell(snapshot, spec),
                              OriginName(snapshot.origin(spec.name)),
                              snapshot.note(spec.name)));
  }
  return out;
}

absl::StatusOr<std::string> RenderJson(const EnvSnapshot& snapshot) {
  Struct root;
  auto& fields = *root.mutable_fields();
  auto& variables =
      *fields["variables"].mutable_struct_value()->mutable_fields();
  for (const VarSpec& spec : Variables()) {
    auto& variable =
        *variables[spec.name].mutable_struct_value()->mutable_fields();
    variable["value"] = TypedValue(snapshot, spec);
    variable["origin"].set_string_value(
        std::string(OriginName(snapshot.origin(spec.name))));
    if (!snapshot.note(spec.name).empty()) {
      variable["note"].set_string_value(snapshot.note(spec.name));
    }
  }
  ListValue* warnings = fields["warnings"].mutable_list_value();
  for (const std::string& warning : snapshot.warnings()) {
    warnings->add_values()->set_string_value(warning);
  }

  // Deterministic serialization sorts map keys, so the output is stable.
  std::string binary;
  {
    google::protobuf::io::StringOutputStream stream(&binary);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.SetSerializationDeterministic(true);
    root.SerializeToCodedStream(&coded);
  }
  constexpr absl::string_view kUrlPrefix = "type.googleapis.com";
  std::unique_ptr<google::protobuf::util::TypeResolver> resolver(
      google::protobuf::util::NewTypeResolverForDescriptorPool(
          std::string(kUrlPrefix),
          google::protobuf::DescriptorPool::generated_pool()));
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  std::string json;
  auto status = google::protobuf::util::BinaryToJsonString(
      resolver.get(),
      absl::StrCat(kUrlPrefix, "/", Struct::descriptor()->full_name()), binary,
      &json, options);
  if (!status.ok()) {
    return absl::InternalError(
        absl::StrCat("cannot print JSON: ", status.ToString()));
  }
  return json;
}

std::string RenderExplain(const EnvSnapshot& snapshot, const VarSpec& spec) {
  std::string out = absl::StrCat(spec.name, " (", TypeName(spec.type), ")\n");
  auto field = [&out](absl::string_view label, absl::string_view text) {
    if (!text.empty()) absl::StrAppend(&out, "  ", label, text, "\n");
  };
  field("section:    ", spec.section);
  field("read by:    ", ReadersText(spec.readers));
  field("default:    ", DefaultText(spec));
  field("validation: ", ValidationText(spec));
  field("value:      ",
        absl::StrCat(Cell(snapshot, spec), " (",
                     OriginName(snapshot.origin(spec.name)), ")"));
  field("note:       ", snapshot.note(spec.name));
  for (const std::string& warning : snapshot.warnings()) {
    if (absl::StartsWith(warning, absl::StrCat(spec.name, "="))) {
      field("warning:    ", warning);
    }
  }
  absl::StrAppend(&out, "\n", Wrap(spec.doc, 78, "  "), "\n");
  return out;
}

std::string RenderMarkdown() {
  std::string out(kMarkdownHeader);
  absl::string_view section;
  for (const VarSpec& spec : Variables()) {
    if (spec.section != section) {
      section = spec.section;
      absl::StrAppend(&out, "\n## ", section, "\n\n",
                      "| Variable | Type | Default | Validation | Read by | "
                      "Description |\n",
                      "|---|---|---|---|---|---|\n");
    }
    std::string default_cell =
        spec.default_doc != nullptr || spec.default_value == nullptr
            ? DefaultText(spec)
            : absl::StrCat("`", spec.default_value, "`");
    if (default_cell == "``") default_cell = "`\"\"`";
    std::vector<std::string> cells = {absl::StrCat("`", spec.name, "`"),
                                      std::string(TypeName(spec.type)),
                                      default_cell,
                                      ValidationText(spec),
                                      ReadersText(spec.readers),
                                      spec.doc};
    for (std::string& cell : cells) cell = MarkdownCell(cell);
    absl::StrAppend(&out, "| ", absl::StrJoin(cells, " | "), " |\n");
  }
  return out;
}

}  // namespace neffd::config
