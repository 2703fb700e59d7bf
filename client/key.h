// client/key.h
//
// The persistent cache key of a compiled graph (docs/ARCHITECTURE.md, "Keys";
// TORCH_NEURONX_NEFF_KEY_FROM_HLO). A key is the lowercase hex SHA-256 of a
// length-prefixed record of
//   - the source: the lowered HLO bytes (key_from_hlo) or the caller's
//     in-memory base key (otherwise), tagged so the two never collide;
//   - the canonical compiler flags (CanonicalCompilerFlags);
//   - the compiler version;
//   - the platform target (trn2, trn3, ...).
// Any change in one of them changes the key; the same graph compiled from two
// working directories, or with two log files, gets the same key. The record
// format is versioned ("neffd-key-v1"); changing it invalidates every cache,
// so the known-answer vectors in key_test.cc must never change.
//
// All functions are thread-safe and pure.
#ifndef NEFFD_CLIENT_KEY_H_
#define NEFFD_CLIENT_KEY_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace neffd {

// Flags that name where the compiler writes, not what it compiles. Both the
// "--flag=value" and the "--flag value" forms are dropped.
inline constexpr absl::string_view kPathOnlyCompilerFlags[] = {
    "--logfile", "--output", "--workdir"};

// Splits `flags` on ASCII whitespace, drops the path-only flags (with their
// value) and joins the rest with single spaces, keeping their order.
std::string CanonicalCompilerFlags(absl::string_view flags);
// The same for flags given one argument per element; an element may itself
// hold several whitespace-separated flags.
std::string CanonicalCompilerFlags(absl::Span<const std::string> flags);

struct KeyInputs {
  // The lowered HLO module (used when key_from_hlo).
  absl::string_view hlo_bytes;
  // The caller's in-memory base key (used when !key_from_hlo).
  absl::string_view base_key;
  // Raw flags; canonicalised here.
  absl::string_view compiler_flags;
  absl::string_view compiler_version;
  absl::string_view platform_target;
};

// The key for `inputs`. InvalidArgument naming the field when the selected
// source (hlo_bytes or base_key) is empty or the compiler version is empty.
absl::StatusOr<std::string> DeriveKey(const KeyInputs& inputs,
                                      bool key_from_hlo);

}  // namespace neffd

#endif  // NEFFD_CLIENT_KEY_H_
