#include "store/entry_id.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace neffd {
namespace {

constexpr size_t kMaxTokenLength = 128;

bool IsTokenChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (c >= '0' && c <= '9') || c == '_' || c == '+' || c == '.' || c == '-';
}

}  // namespace

absl::string_view ArtifactFileName(Namespace ns) {
  return ns == Namespace::kNeff ? "model.neff" : "model.hlo";
}

absl::string_view NamespaceName(Namespace ns) {
  return ns == Namespace::kNeff ? "neff" : "hlo";
}

absl::Status ValidateToken(absl::string_view field, absl::string_view value) {
  if (value.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": is empty"));
  }
  if (value.size() > kMaxTokenLength) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: is %d characters; at most %d are allowed", field,
                        value.size(), kMaxTokenLength));
  }
  if (value == "." || value == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ": '", value, "' is not a valid name"));
  }
  for (char c : value) {
    if (IsTokenChar(c)) continue;
    std::string shown =
        (c == '\0')  ? "NUL"
        : (c == '/') ? "'/'"
        : (c < ' ' || c > '~')
            ? absl::StrFormat("byte 0x%02x", static_cast<unsigned char>(c))
            : absl::StrCat("'", std::string(1, c), "'");
    return absl::InvalidArgumentError(absl::StrCat(
        field, ": contains ", shown, "; only [A-Za-z0-9_+.-] are allowed"));
  }
  return absl::OkStatus();
}

absl::StatusOr<EntryKey> EntryKey::Parse(absl::string_view ns,
                                         absl::string_view compiler_version,
                                         absl::string_view key) {
  Namespace parsed_ns;
  if (ns == "neff") {
    parsed_ns = Namespace::kNeff;
  } else if (ns == "hlo") {
    parsed_ns = Namespace::kHlo;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("id.namespace: unknown namespace '", absl::CHexEscape(ns),
                     "'; expected 'neff' or 'hlo'"));
  }
  if (!compiler_version.empty()) {
    if (absl::Status s = ValidateToken("id.compiler_version", compiler_version);
        !s.ok()) {
      return s;
    }
  }
  if (absl::Status s = ValidateToken("id.key", key); !s.ok()) return s;
  return EntryKey(parsed_ns, std::string(compiler_version), std::string(key));
}

absl::StatusOr<EntryKey> EntryKey::Parse(const v1::EntryId& id) {
  return Parse(id.namespace_(), id.compiler_version(), id.key());
}

absl::StatusOr<EntryKey> EntryKey::FromCanonical(absl::string_view canonical) {
  std::vector<absl::string_view> parts = absl::StrSplit(canonical, '/');
  if (parts.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", absl::CHexEscape(canonical),
                     "' is not namespace/compiler_version/key"));
  }
  return Parse(parts[0], parts[1], parts[2]);
}

std::string EntryKey::Canonical() const {
  return absl::StrCat(NamespaceName(ns_), "/", compiler_version_, "/", key_);
}

v1::EntryId EntryKey::ToProto() const {
  v1::EntryId id;
  id.set_namespace_(std::string(NamespaceName(ns_)));
  id.set_compiler_version(compiler_version_);
  id.set_key(key_);
  return id;
}

}  // namespace neffd
