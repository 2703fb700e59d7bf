// Fuzzes EntryKey::Parse, the only way a client string becomes a path: the
// input is split at NUL bytes into namespace, compiler version and key. A
// key that parses must be safe to join under a root.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "store/entry_id.h"
#include "store/layout.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> parts = absl::StrSplit(text, absl::ByChar('\0'));
  parts.resize(3);
  absl::StatusOr<neffd::EntryKey> key =
      neffd::EntryKey::Parse(parts[0], parts[1], parts[2]);
  if (!key.ok()) return 0;
  for (const std::string& path : {neffd::ArtifactRelPath(key->ns(), key->key()),
                                  neffd::RecordsRelDir(key->key())}) {
    for (absl::string_view part : absl::StrSplit(path, '/')) {
      if (part.empty() || part == "." || part == "..") std::abort();
    }
    if (path.find('\0') != std::string::npos || path[0] == '/') std::abort();
    if (std::count(path.begin(), path.end(), '/') != 2) std::abort();
  }
  absl::StatusOr<neffd::EntryKey> again =
      neffd::EntryKey::FromCanonical(key->Canonical());
  if (!again.ok() || !(*again == *key)) std::abort();
  absl::StatusOr<neffd::EntryKey> from_proto =
      neffd::EntryKey::Parse(key->ToProto());
  if (!from_proto.ok() || !(*from_proto == *key)) std::abort();
  return 0;
}
