// Fuzzes the service's request validation (daemon/server/
// request_validation.h) with arbitrary bytes decoded as Lock, Publish or
// Unlock requests (the first byte picks which). A request that passes must
// name a safe entry and, for a staged publish, a file directly inside the
// staging directory; the limits must hold.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "daemon/server/request_validation.h"
#include "store/layout.h"

namespace {

constexpr char kStaging[] = "/run/neffd/staging";

void CheckKey(const neffd::EntryKey& key) {
  const std::string dir = neffd::ArtifactRelPath(key.ns(), key.key());
  if (dir.find("..") == 0 || dir.find("/../") != std::string::npos ||
      dir.find('\0') != std::string::npos) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const char* bytes = reinterpret_cast<const char*>(data) + 1;
  const int length = static_cast<int>(size - 1);
  neffd::RequestLimits limits;
  limits.max_entry_bytes = 1 << 20;
  limits.max_inline_bytes = 1 << 10;
  switch (data[0] % 3) {
    case 0: {
      neffd::v1::LockRequest request;
      if (!request.ParseFromArray(bytes, length)) return 0;
      auto key = neffd::ValidateLockRequest(request, limits);
      if (key.ok()) {
        CheckKey(*key);
        if (request.holder().host().size() > limits.max_host_bytes) {
          std::abort();
        }
      }
      break;
    }
    case 1: {
      neffd::v1::PublishRequest request;
      if (!request.ParseFromArray(bytes, length)) return 0;
      auto key = neffd::ValidatePublishRequest(request, limits, kStaging);
      if (!key.ok()) break;
      CheckKey(*key);
      if (request.size() > limits.max_entry_bytes) std::abort();
      if (request.has_inline_bytes()) {
        if (request.inline_bytes().size() != request.size()) std::abort();
      } else {
        const std::string& path = request.staged_path();
        const std::string prefix = std::string(kStaging) + "/";
        if (path.compare(0, prefix.size(), prefix) != 0) std::abort();
        const std::string name = path.substr(prefix.size());
        if (name.empty() || name == "." || name == ".." ||
            name.find('/') != std::string::npos ||
            name.find('\0') != std::string::npos) {
          std::abort();
        }
      }
      break;
    }
    case 2: {
      neffd::v1::UnlockRequest request;
      if (!request.ParseFromArray(bytes, length)) return 0;
      auto key = neffd::ValidateUnlockRequest(request, limits);
      if (key.ok()) CheckKey(*key);
      break;
    }
  }
  return 0;
}
