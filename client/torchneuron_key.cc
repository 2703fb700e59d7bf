#include "client/torchneuron_key.h"

// For XXH3_state_t's definition: the state lives on the stack, so hashing
// allocates nothing and cannot fail.
#define XXH_STATIC_LINKING_ONLY
#include <xxhash.h>

#include <cstdio>

namespace neffd {

std::string TorchNeuronKey(absl::string_view base_key,
                           absl::string_view ir_bytes) {
  // Streamed, so the IR (hundreds of MB for a large graph) is not copied to
  // be concatenated: XXH3's streaming and one-shot results are the same.
  XXH3_state_t state;
  XXH3_INITSTATE(&state);
  XXH3_128bits_reset(&state);
  XXH3_128bits_update(&state, base_key.data(), base_key.size());
  XXH3_128bits_update(&state, ir_bytes.data(), ir_bytes.size());
  const XXH128_hash_t hash = XXH3_128bits_digest(&state);
  char hex[kTorchNeuronKeyLength + 1];
  std::snprintf(hex, sizeof(hex), "%016llx%016llx",
                static_cast<unsigned long long>(hash.high64),
                static_cast<unsigned long long>(hash.low64));
  return std::string(hex, kTorchNeuronKeyLength);
}

}  // namespace neffd
