// allocator/testing/fake_segment_provider.h
//
// FakeSegmentProvider hands out address ranges that are never backed by
// memory, deterministically: two fakes given the same calls return the same
// addresses. Addresses only grow and are never reused. Each segment is
// followed by a gap (unless gap_bytes is 0), so blocks of different segments
// are never adjacent by accident. Tests can make the next calls fail.
// Thread-safe.

#ifndef NEFFD_ALLOCATOR_TESTING_FAKE_SEGMENT_PROVIDER_H_
#define NEFFD_ALLOCATOR_TESTING_FAKE_SEGMENT_PROVIDER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "allocator/internal/mutex_lock.h"
#include "allocator/segment_provider.h"

namespace neffd::allocator::test_support {

class FakeSegmentProvider : public SegmentProvider {
 public:
  static constexpr size_t kUnlimited = ~size_t{0};
  static constexpr uintptr_t kBase = uintptr_t{1} << 40;

  explicit FakeSegmentProvider(size_t capacity = kUnlimited,
                               size_t gap_bytes = size_t{1} << 20)
      : capacity_(capacity), gap_(gap_bytes) {}

  // The next `count` AllocateSegment calls fail with `code`.
  void FailNext(int count,
                absl::StatusCode code = absl::StatusCode::kResourceExhausted) {
    internal::MutexLock lock(&mu_);
    fail_count_ = count;
    fail_code_ = code;
  }

  absl::StatusOr<void*> AllocateSegment(size_t bytes) override {
    internal::MutexLock lock(&mu_);
    ++allocate_calls_;
    if (fail_count_ > 0) {
      --fail_count_;
      return absl::Status(fail_code_, "FakeSegmentProvider: injected failure");
    }
    if (bytes == 0 || bytes > capacity_ - used_) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("FakeSegmentProvider: %d bytes requested, %d free",
                          bytes, capacity_ - used_));
    }
    const uintptr_t addr = next_;
    next_ += (bytes + 4095) / 4096 * 4096 + gap_;
    used_ += bytes;
    live_.emplace(addr, bytes);
    sizes_.push_back(bytes);
    return reinterpret_cast<void*>(addr);
  }

  absl::Status FreeSegment(void* segment, size_t bytes) override {
    internal::MutexLock lock(&mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(segment));
    if (it == live_.end() || it->second != bytes) {
      ++bad_frees_;
      return absl::InvalidArgumentError(absl::StrFormat(
          "FakeSegmentProvider: %p (%d bytes) is not live", segment, bytes));
    }
    live_.erase(it);
    used_ -= bytes;
    ++free_calls_;
    return absl::OkStatus();
  }

  size_t FreeBytes() const override {
    internal::MutexLock lock(&mu_);
    return capacity_ == kUnlimited ? kUnknownFreeBytes : capacity_ - used_;
  }

  size_t used_bytes() const {
    internal::MutexLock lock(&mu_);
    return used_;
  }
  size_t live_segments() const {
    internal::MutexLock lock(&mu_);
    return live_.size();
  }
  int allocate_calls() const {
    internal::MutexLock lock(&mu_);
    return allocate_calls_;
  }
  int free_calls() const {
    internal::MutexLock lock(&mu_);
    return free_calls_;
  }
  int bad_frees() const {
    internal::MutexLock lock(&mu_);
    return bad_frees_;
  }
  // Sizes of the successful AllocateSegment calls, in order.
  std::vector<size_t> segment_sizes() const {
    internal::MutexLock lock(&mu_);
    return sizes_;
  }

 private:
  const size_t capacity_;
  const size_t gap_;
  mutable absl::Mutex mu_;
  uintptr_t next_ ABSL_GUARDED_BY(mu_) = kBase;
  size_t used_ ABSL_GUARDED_BY(mu_) = 0;
  int fail_count_ ABSL_GUARDED_BY(mu_) = 0;
  absl::StatusCode fail_code_ ABSL_GUARDED_BY(mu_) =
      absl::StatusCode::kResourceExhausted;
  int allocate_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int free_calls_ ABSL_GUARDED_BY(mu_) = 0;
  int bad_frees_ ABSL_GUARDED_BY(mu_) = 0;
  absl::flat_hash_map<uintptr_t, size_t> live_ ABSL_GUARDED_BY(mu_);
  std::vector<size_t> sizes_ ABSL_GUARDED_BY(mu_);
};

}  // namespace neffd::allocator::test_support

#endif  // NEFFD_ALLOCATOR_TESTING_FAKE_SEGMENT_PROVIDER_H_
