// store/entry_id.h
//
// EntryKey names one cache entry and the compiler version a request expects
// of it: (namespace, compiler_version, key). It is the only way a
// client-supplied string becomes part of a path, so it is built only by
// Parse(): the namespace is "neff" or "hlo"; the key is 1..128 characters of
// [A-Za-z0-9_+.-] and never "." or ".."; the compiler version is empty (any
// version: a TorchNeuron key commits to its compiler configuration) or a
// token like the key. A parsed EntryKey is therefore safe to join under a
// cache root (store/layout.h). The file is named by the key alone: the
// version is recorded in the entry's done record and checked on lookup.
//
// Thread-compatible value type.
#ifndef NEFFD_STORE_ENTRY_ID_H_
#define NEFFD_STORE_ENTRY_ID_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "proto/neffd/v1/records.pb.h"

namespace neffd {

enum class Namespace { kNeff, kHlo };

// "neff" or "hlo".
absl::string_view NamespaceName(Namespace ns);

// The artifact's file name in an entry directory: "model.neff" or
// "model.hlo".
absl::string_view ArtifactFileName(Namespace ns);

// InvalidArgument naming `field` unless `value` is a valid key-like token.
absl::Status ValidateToken(absl::string_view field, absl::string_view value);

class EntryKey {
 public:
  // Validates every field of `id`; the error names the offending field
  // (e.g. "id.key: contains '/'").
  static absl::StatusOr<EntryKey> Parse(const v1::EntryId& id);
  static absl::StatusOr<EntryKey> Parse(absl::string_view ns,
                                        absl::string_view compiler_version,
                                        absl::string_view key);

  // The inverse of Canonical().
  static absl::StatusOr<EntryKey> FromCanonical(absl::string_view canonical);

  Namespace ns() const { return ns_; }
  const std::string& compiler_version() const { return compiler_version_; }
  const std::string& key() const { return key_; }

  // "{ns}/{version}/{key}" ("{ns}//{key}" for any version): unique across
  // namespaces; used as a map and index key.
  std::string Canonical() const;
  v1::EntryId ToProto() const;

  friend bool operator==(const EntryKey& a, const EntryKey& b) {
    return a.ns_ == b.ns_ && a.compiler_version_ == b.compiler_version_ &&
           a.key_ == b.key_;
  }

 private:
  EntryKey(Namespace ns, std::string version, std::string key)
      : ns_(ns), compiler_version_(std::move(version)), key_(std::move(key)) {}

  Namespace ns_;
  std::string compiler_version_;
  std::string key_;
};

}  // namespace neffd

#endif  // NEFFD_STORE_ENTRY_ID_H_
