// client/torchneuron_key.h
//
// TorchNeuron's persistent NEFF cache key (the spec page "How an unmodified
// TorchNeuron rank uses the NEFF cache", "Layout and key"): the XXH3-128
// hash of the in-memory base key's bytes followed by the IR bytes (HLO
// protobuf or StableHLO text), printed as the high 64 bits then the low 64
// bits, each as 16 zero-padded lowercase hex digits. An unmodified rank names
// its entry `<k0k1>/<k2k3>/<key>.neff` with it, so a client that computes the
// same key finds that rank's entries and the rank finds the client's.
//
// The hash is Debian's libxxhash (libxxhash-dev), never a copy of it: the
// key must be bit-for-bit TorchNeuron's, and `xxhsum -H2` over the same bytes
// prints the same 32 digits (tests/torchneuron_key_test.cc).
//
// Thread-safe and pure.
#ifndef NEFFD_CLIENT_TORCHNEURON_KEY_H_
#define NEFFD_CLIENT_TORCHNEURON_KEY_H_

#include <cstddef>
#include <string>

#include "absl/strings/string_view.h"

namespace neffd {

// Length of a TorchNeuron key: 32 lowercase hex digits.
inline constexpr size_t kTorchNeuronKeyLength = 32;

// XXH3-128(base_key || ir_bytes) as 32 lowercase hex digits. Any bytes are
// valid, empty ones included (TorchNeuron hashes what it has).
std::string TorchNeuronKey(absl::string_view base_key,
                           absl::string_view ir_bytes);

}  // namespace neffd

#endif  // NEFFD_CLIENT_TORCHNEURON_KEY_H_
