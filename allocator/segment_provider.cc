#include "allocator/segment_provider.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_format.h"
#include "allocator/internal/mutex_lock.h"

namespace neffd::allocator {

HostMemoryProvider::HostMemoryProvider(size_t capacity_bytes)
    : capacity_(capacity_bytes) {}

HostMemoryProvider::~HostMemoryProvider() {
  internal::MutexLock lock(&mu_);
  for (const auto& [ptr, bytes] : mappings_) munmap(ptr, bytes);
}

absl::StatusOr<void*> HostMemoryProvider::AllocateSegment(size_t bytes) {
  if (bytes == 0) {
    return absl::InvalidArgumentError(
        "HostMemoryProvider: a segment of 0 bytes was requested");
  }
  internal::MutexLock lock(&mu_);
  if (bytes > capacity_ - used_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "HostMemoryProvider: %d bytes requested, %d of %d bytes free", bytes,
        capacity_ - used_, capacity_));
  }
  void* ptr = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ptr == MAP_FAILED) {
    const int err = errno;
    const std::string message =
        absl::StrFormat("HostMemoryProvider: mmap of %d bytes failed: %s",
                        bytes, std::strerror(err));
    if (err == ENOMEM) return absl::ResourceExhaustedError(message);
    return absl::InternalError(message);
  }
  used_ += bytes;
  mappings_.emplace(ptr, bytes);
  return ptr;
}

absl::Status HostMemoryProvider::FreeSegment(void* segment, size_t bytes) {
  internal::MutexLock lock(&mu_);
  auto it = mappings_.find(segment);
  if (it == mappings_.end() || it->second != bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "HostMemoryProvider: %p (%d bytes) is not a live segment", segment,
        bytes));
  }
  mappings_.erase(it);
  used_ -= bytes;
  if (munmap(segment, bytes) != 0) {
    return absl::InternalError(
        absl::StrFormat("HostMemoryProvider: munmap of %p failed: %s", segment,
                        std::strerror(errno)));
  }
  return absl::OkStatus();
}

size_t HostMemoryProvider::FreeBytes() const {
  if (capacity_ == kUnlimited) return kUnknownFreeBytes;
  internal::MutexLock lock(&mu_);
  return capacity_ - used_;
}

size_t HostMemoryProvider::used_bytes() const {
  internal::MutexLock lock(&mu_);
  return used_;
}

size_t HostMemoryProvider::live_segments() const {
  internal::MutexLock lock(&mu_);
  return mappings_.size();
}

}  // namespace neffd::allocator
