// Fuzzes ParseSegmentAllocatorConfig (TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG):
// it never fails, and what it returns always obeys the config's rules.
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "allocator/allocator_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  absl::string_view text(reinterpret_cast<const char*>(data), size);
  neffd::allocator::ParsedSegmentAllocatorConfig parsed =
      neffd::allocator::ParseSegmentAllocatorConfig(text);
  if (!neffd::allocator::ValidateSegmentAllocatorConfig(parsed.config).ok()) {
    std::abort();
  }
  size_t bytes = 0;
  (void)neffd::allocator::ParseDecimalBytes(text, &bytes);
  return 0;
}
