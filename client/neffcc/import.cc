#include "client/neffcc/import.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "client/explain.h"
#include "client/neffcc/command_line.h"
#include "client/neffcc/compile_flow.h"
#include "client/neffcc/outputs.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "store/file_util.h"

namespace neffd::neffcc {
namespace {

constexpr char kVersionPrefix[] = "neuronxcc-";
constexpr char kNamespace[] = "neff";
constexpr size_t kMaxFlagsBytes = 1 << 20;
constexpr size_t kMaxInputBytes = size_t{4} << 30;

bool Exists(const std::string& path) { return access(path.c_str(), F_OK) == 0; }

absl::StatusOr<std::vector<std::string>> ReadFlags(const std::string& path) {
  absl::StatusOr<std::string> json = ReadSmallFile(path, kMaxFlagsBytes);
  if (!json.ok()) return json.status();
  google::protobuf::ListValue list;
  if (!google::protobuf::util::JsonStringToMessage(*json, &list).ok()) {
    return absl::InvalidArgumentError("compile_flags.json is not a JSON list");
  }
  std::vector<std::string> flags;
  for (const google::protobuf::Value& v : list.values()) {
    if (v.kind_case() != google::protobuf::Value::kStringValue) {
      return absl::InvalidArgumentError(
          "compile_flags.json holds a non-string");
    }
    flags.push_back(v.string_value());
  }
  return flags;
}

class Importer {
 public:
  Importer(CacheClient& client, LibneuronxlaImport& counts)
      : client_(client), counts_(counts) {}

  // An error only for what stops the whole import.
  absl::Status Entry(const std::string& version, const std::string& dir) {
    ++counts_.scanned;
    const std::string hlo = dir + "/model.hlo_module.pb";
    const std::string neff = dir + "/model.neff";
    if (!Exists(neff) && Exists(dir + "/model.log")) {
      return Skip(counts_.failed, dir, "a failed compile (model.log)");
    }
    for (const char* name : {"model.done", "model.neff", "model.hlo_module.pb",
                             "compile_flags.json"}) {
      if (!Exists(absl::StrCat(dir, "/", name))) {
        return Skip(counts_.incomplete, dir,
                    absl::StrCat("incomplete (no ", name, ")"));
      }
    }
    absl::StatusOr<std::vector<std::string>> flags =
        ReadFlags(dir + "/compile_flags.json");
    if (!flags.ok()) {
      return Skip(counts_.incomplete, dir, flags.status().message());
    }
    // libneuronxla's own call (import.h).
    std::vector<std::string> args = {"compile", hlo, "--output", neff};
    if (std::none_of(flags->begin(), flags->end(), [](const std::string& f) {
          return absl::StartsWith(f, "--framework");
        })) {
      args.push_back("--framework=XLA");
    }
    args.insert(args.end(), flags->begin(), flags->end());
    absl::StatusOr<CompileCommand> command = ParseCompile(args);
    absl::StatusOr<std::string> input = ReadSmallFile(hlo, kMaxInputBytes);
    if (!command.ok() || !input.ok()) {
      return Skip(counts_.incomplete, dir,
                  !command.ok() ? command.status().message()
                                : input.status().message());
    }
    absl::StatusOr<std::string> key =
        DeriveCompileKey(client_, *command, *input, version);
    if (!key.ok()) return Skip(counts_.incomplete, dir, key.status().message());
    const std::string record = KeyInputsToJson(
        MakeKeyInputs(client_, *command, *input, version, {dir}));
    absl::StatusOr<CacheResult> result = client_.GetOrCompile(
        kNamespace, version, *key,
        [&](const CompileJob& job) { return Artifact(dir, job); },
        {{kKeyInputsMetadata, record}});
    if (!result.ok()) {
      if (absl::IsInvalidArgument(result.status())) {
        return Skip(counts_.incomplete, dir, result.status().message());
      }
      return result.status();
    }
    ++(result->source == CacheResult::Source::kCompiled ? counts_.imported
                                                        : counts_.cached);
    return absl::OkStatus();
  }

 private:
  absl::Status Skip(uint64_t& counter, const std::string& dir,
                    absl::string_view why) {
    ++counter;
    counts_.skipped.push_back(absl::StrCat(dir, ": ", why));
    return absl::OkStatus();
  }

  // The entry's result as neffcc's compile would have left it: a copy of
  // the NEFF, with wrapped_neff.hlo in a bundle where present.
  CompileResult Artifact(const std::string& dir, const CompileJob& job) {
    const std::string copy = job.workdir + "/model.neff.import";
    std::vector<SideOutput> sides;
    const std::string wrapped = dir + "/wrapped_neff.hlo";
    struct stat st;
    if (stat(wrapped.c_str(), &st) == 0) {
      sides.push_back(SideOutput{SideOutput::Place::kCwd, "wrapped_neff.hlo",
                                 wrapped, uint64_t(st.st_size)});
    }
    absl::Status s = PlaceFile(dir + "/model.neff", copy);
    if (s.ok()) s = WriteArtifact(copy, sides, job.output_path);
    unlink(copy.c_str());
    return s.ok() ? CompileResult::Ok()
                  : CompileResult::Cancelled(s.ToString());
  }

  CacheClient& client_;
  LibneuronxlaImport& counts_;
};

std::vector<std::filesystem::path> SortedDirs(const std::string& dir,
                                              absl::string_view prefix) {
  std::vector<std::filesystem::path> out;
  std::error_code error;
  for (const auto& e : std::filesystem::directory_iterator(dir, error)) {
    if (e.is_directory(error) &&
        absl::StartsWith(e.path().filename().string(), prefix)) {
      out.push_back(e.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

bool LooksLikeLibneuronxlaCache(const std::string& dir) {
  return !SortedDirs(dir, kVersionPrefix).empty();
}

absl::StatusOr<LibneuronxlaImport> ImportLibneuronxlaCache(
    CacheClient& client, const std::string& dir) {
  LibneuronxlaImport counts;
  Importer importer(client, counts);
  for (const auto& version_dir : SortedDirs(dir, kVersionPrefix)) {
    const std::string version =
        version_dir.filename().string().substr(sizeof(kVersionPrefix) - 1);
    for (const auto& entry : SortedDirs(version_dir.string(), "MODULE_")) {
      if (absl::Status s = importer.Entry(version, entry.string()); !s.ok()) {
        return s;
      }
    }
  }
  return counts;
}

}  // namespace neffd::neffcc
