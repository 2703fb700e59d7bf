// Fuzzes the environment value parsers behind the registry (config/parse.h).
// The first byte picks the parser; the rest is the value. Results must obey
// the parser's contract (ranges, sorted lists).
#include <algorithm>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "config/parse.h"

namespace p = neffd::config::internal;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  absl::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 10) {
    case 0:
      (void)p::ParseBool(text);
      break;
    case 1: {
      absl::StatusOr<int64_t> v = p::ParseDecimal(text, -5, 1 << 20);
      if (v.ok() && (*v < -5 || *v > (1 << 20))) std::abort();
      break;
    }
    case 2:
    case 3: {
      absl::StatusOr<std::vector<int64_t>> v =
          p::ParseIntList(text, 0, 127, data[0] % 10 == 3);
      if (v.ok()) {
        if (!std::is_sorted(v->begin(), v->end())) std::abort();
        if (std::adjacent_find(v->begin(), v->end()) != v->end()) std::abort();
        for (int64_t x : *v) {
          if (x < 0 || x > 127) std::abort();
        }
      }
      break;
    }
    case 4:
      (void)p::ParseNameList(text, data[0] & 0x80 ? "" : "a,bb,ccc");
      break;
    case 5:
      (void)p::CheckPlatform(text);
      break;
    case 6:
      (void)p::CheckAddress(text);
      break;
    case 7:
      (void)p::ParseTorchVersion(text);
      break;
    case 8:
      (void)p::PlatformFromInstanceType(text);
      break;
    case 9: {
      absl::string_view a = text.substr(0, std::min<size_t>(text.size(), 64));
      absl::string_view b = text.substr(a.size(), 64);
      int d = p::EditDistance(a, b);
      if (d < 0 || d > static_cast<int>(std::max(a.size(), b.size()))) {
        std::abort();
      }
      break;
    }
  }
  return 0;
}
