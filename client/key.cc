#include "client/key.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "store/digest.h"

namespace neffd {
namespace {

constexpr char kWhitespace[] = " \t\n\r\f\v";

// True if `token` is a path-only flag given as "--flag" (its value follows);
// sets *with_value if it was "--flag=value" instead.
bool IsPathOnlyFlag(absl::string_view token, bool* with_value) {
  for (absl::string_view flag : kPathOnlyCompilerFlags) {
    if (token == flag) {
      *with_value = false;
      return true;
    }
    if (absl::StartsWith(token, flag) && token.size() > flag.size() &&
        token[flag.size()] == '=') {
      *with_value = true;
      return true;
    }
  }
  return false;
}

void AppendField(Sha256& hash, absl::string_view name,
                 absl::string_view value) {
  const std::string header = absl::StrCat(name, ":", value.size(), ":");
  hash.Update(header.data(), header.size());
  hash.Update(value.data(), value.size());
  hash.Update("\n", 1);
}

}  // namespace

std::string CanonicalCompilerFlags(absl::string_view flags) {
  std::vector<absl::string_view> tokens =
      absl::StrSplit(flags, absl::ByAnyChar(kWhitespace), absl::SkipEmpty());
  std::vector<absl::string_view> kept;
  for (size_t i = 0; i < tokens.size(); ++i) {
    bool with_value = false;
    if (!IsPathOnlyFlag(tokens[i], &with_value)) {
      kept.push_back(tokens[i]);
      continue;
    }
    // "--output PATH": the value is the next token unless that is a flag.
    if (!with_value && i + 1 < tokens.size() &&
        !absl::StartsWith(tokens[i + 1], "--")) {
      ++i;
    }
  }
  return absl::StrJoin(kept, " ");
}

std::string CanonicalCompilerFlags(absl::Span<const std::string> flags) {
  return CanonicalCompilerFlags(absl::StrJoin(flags, " "));
}

absl::StatusOr<std::string> DeriveKey(const KeyInputs& inputs,
                                      bool key_from_hlo) {
  const absl::string_view source =
      key_from_hlo ? inputs.hlo_bytes : inputs.base_key;
  if (source.empty()) {
    return absl::InvalidArgumentError(
        key_from_hlo ? "hlo_bytes: is empty (TORCH_NEURONX_NEFF_KEY_FROM_HLO=1 "
                       "derives the key from the lowered HLO)"
                     : "base_key: is empty (TORCH_NEURONX_NEFF_KEY_FROM_HLO=0 "
                       "derives the key from the in-memory base key)");
  }
  if (inputs.compiler_version.empty()) {
    return absl::InvalidArgumentError("compiler_version: is empty");
  }
  Sha256 hash;
  constexpr absl::string_view kFormat = "neffd-key-v1\n";
  hash.Update(kFormat.data(), kFormat.size());
  AppendField(hash, key_from_hlo ? "hlo" : "base_key", source);
  AppendField(hash, "flags", CanonicalCompilerFlags(inputs.compiler_flags));
  AppendField(hash, "compiler_version", inputs.compiler_version);
  AppendField(hash, "platform_target", inputs.platform_target);
  return hash.HexDigest();
}

}  // namespace neffd
