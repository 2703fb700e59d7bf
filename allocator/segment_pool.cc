#include "allocator/segment_pool.h"

#include <cstdint>
#include <cstdio>
#include <set>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "allocator/internal/mutex_lock.h"

namespace neffd::allocator {
namespace {

struct Block;

// Key of a free block: best fit is the first key not below (size, 0). The
// fields are mutable so FreeIndex::Replace can rewrite a key in place when
// that keeps the order.
struct FreeKey {
  mutable size_t size;
  mutable uintptr_t addr;
  mutable Block* block;
};
struct FreeKeyLess {
  bool operator()(const FreeKey& a, const FreeKey& b) const {
    return a.size != b.size ? a.size < b.size : a.addr < b.addr;
  }
};
using FreeSet = std::set<FreeKey, FreeKeyLess>;

// A contiguous piece of one segment. The blocks of a segment form a list in
// address order (prev/next); a block with neither neighbour is a whole
// segment.
struct Block {
  uintptr_t addr;
  size_t size;
  size_t requested;  // while allocated
  Block* prev;
  Block* next;
  FreeSet::iterator free_it;  // while free and cached
  PoolKind pool;
  bool allocated;

  bool IsSplit() const { return prev != nullptr || next != nullptr; }
};

// The free blocks of one pool ordered by (size, address). Each cached block
// remembers its position, so removing it needs no search, and set nodes are
// recycled, so a warm allocate/free cycle never calls malloc. (absl's btree
// was measured slower here: its erase alone cost ~35 ns.)
class FreeIndex {
 public:
  // The best fit for `size`: the smallest (size, address) not below it.
  Block* BestFit(size_t size) const {
    auto it = set_.lower_bound(FreeKey{size, 0, nullptr});
    return it == set_.end() ? nullptr : it->block;
  }

  void Insert(Block* block) {
    const FreeKey key{block->size, block->addr, block};
    if (spare_.empty()) {
      block->free_it = set_.insert(key).first;
      return;
    }
    FreeSet::node_type node = std::move(spare_.back());
    spare_.pop_back();
    node.value() = key;
    block->free_it = set_.insert(std::move(node)).position;
  }

  void Erase(Block* block) { spare_.push_back(set_.extract(block->free_it)); }

  // Erase(old) + Insert(block) in one step: `block` takes over the position
  // of `old`, rewriting the key in place when the order allows (the common
  // case of a split or coalesce that does not pass another free block).
  void Replace(Block* old, Block* block) {
    const FreeSet::iterator it = old->free_it;
    const FreeKey key{block->size, block->addr, block};
    const FreeKeyLess less;
    const bool after_prev = it == set_.begin() || less(*std::prev(it), key);
    const FreeSet::iterator next = std::next(it);
    if (after_prev && (next == set_.end() || less(key, *next))) {
      it->size = key.size;
      it->addr = key.addr;
      it->block = block;
      block->free_it = it;
      return;
    }
    FreeSet::node_type node = set_.extract(it);
    node.value() = key;
    block->free_it = set_.insert(next, std::move(node));
  }

  // Calls f(block) for every cached block; f may not change the index.
  template <typename F>
  void ForEach(F f) const {
    for (const FreeKey& key : set_) f(key.block);
  }

 private:
  FreeSet set_;
  std::vector<FreeSet::node_type> spare_;
};

// Recycles Block objects so splitting and coalescing do not call malloc.
class BlockArena {
 public:
  // A free (not allocated) block with the given place in its segment.
  Block* New(uintptr_t addr, size_t size, Block* prev, Block* next,
             PoolKind pool) {
    Block* b;
    if (free_ != nullptr) {
      b = free_;
      free_ = b->next;
    } else {
      if (chunks_.empty() || used_ == kChunk) {
        chunks_.push_back(std::make_unique<Block[]>(kChunk));
        used_ = 0;
      }
      b = &chunks_.back()[used_++];
    }
    b->addr = addr;
    b->size = size;
    b->requested = 0;
    b->prev = prev;
    b->next = next;
    b->pool = pool;
    b->allocated = false;
    return b;
  }
  void Delete(Block* b) {
    b->next = free_;
    free_ = b;
  }

 private:
  static constexpr size_t kChunk = 256;
  std::vector<std::unique_ptr<Block[]>> chunks_;
  size_t used_ = 0;
  Block* free_ = nullptr;
};

std::string FormatFreeBytes(size_t free_bytes) {
  if (free_bytes == SegmentProvider::kUnknownFreeBytes) return "unknown";
  return absl::StrFormat("%d", free_bytes);
}

}  // namespace

class NeuronSegmentPool::Impl {
 public:
  Impl(const SegmentAllocatorConfig& config, SegmentProvider* provider)
      : config_(config),
        divisions_(EffectiveRoundupDivisions(config)),
        provider_(provider) {}

  ~Impl() {
    internal::MutexLock lock(&mu_);
    std::vector<Block*> heads;
    for (const FreeIndex& index : free_) {
      index.ForEach([&heads](Block* block) {
        if (block->prev == nullptr) heads.push_back(block);
      });
    }
    for (const auto& [addr, block] : live_) {
      if (block->prev == nullptr) heads.push_back(block);
    }
    for (Block* head : heads) {
      size_t bytes = 0;
      for (Block* b = head; b != nullptr; b = b->next) bytes += b->size;
      ReturnToProvider(reinterpret_cast<void*>(head->addr), bytes);
    }
  }

  const SegmentAllocatorConfig& config() const { return config_; }

  absl::StatusOr<Allocation> Allocate(size_t bytes) {
    if (bytes == 0) return Allocation();
    Placement p;
    const bool placed = PlaceRequestFast(config_, divisions_, bytes, &p);
    internal::MutexLock lock(&mu_);
    if (!placed) {
      ++stats_.num_ooms;
      return OutOfMemory(bytes, bytes);
    }
    FreeIndex& index = free_[static_cast<int>(p.pool)];
    Block* block = FindFreeBlock(p.pool, p.rounded);
    const bool cached = block != nullptr;
    if (cached) {
      CountInactiveSplit(block, -1);
    } else {
      absl::StatusOr<Block*> fresh = NewSegment(p);
      if (!fresh.ok()) return fresh.status();
      block = *fresh;
    }
    Block* rest = MaybeSplit(block, p.rounded);
    if (rest != nullptr) {
      CountInactiveSplit(rest, +1);
      if (cached) {
        index.Replace(block, rest);
      } else {
        index.Insert(rest);
      }
    } else if (cached) {
      index.Erase(block);
    }
    block->allocated = true;
    block->requested = bytes;
    live_.emplace(block->addr, block);
    const int64_t size = static_cast<int64_t>(block->size);
    stats_.allocation.Increase(p.pool, 1);
    stats_.allocated_bytes.Increase(p.pool, size);
    stats_.requested_bytes.Increase(p.pool, static_cast<int64_t>(bytes));
    return Allocation{reinterpret_cast<void*>(block->addr), block->size, bytes};
  }

  absl::Status Free(void* ptr) {
    if (ptr == nullptr) return absl::OkStatus();
    internal::MutexLock lock(&mu_);
    auto it = live_.find(reinterpret_cast<uintptr_t>(ptr));
    if (it == live_.end()) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "neffd allocator: Free(%p): not a live allocation of this pool "
          "(double free, or a pointer from elsewhere)",
          ptr));
    }
    Block* block = it->second;
    live_.erase(it);
    const PoolKind pool = block->pool;
    const int64_t size = static_cast<int64_t>(block->size);
    stats_.allocation.Decrease(pool, 1);
    stats_.allocated_bytes.Decrease(pool, size);
    stats_.requested_bytes.Decrease(pool,
                                    static_cast<int64_t>(block->requested));
    block->allocated = false;
    block->requested = 0;
    // Coalesce; the merged block takes over a free neighbour's place in the
    // index.
    FreeIndex& index = free_[static_cast<int>(pool)];
    Block* const prev = block->prev;
    Block* const next = block->next;
    Block* donor = nullptr;
    if (prev != nullptr && !prev->allocated) {
      CountInactiveSplit(prev, -1);
      Merge(block, prev);
      donor = prev;
    }
    if (next != nullptr && !next->allocated) {
      CountInactiveSplit(next, -1);
      Merge(block, next);
      if (donor == nullptr) {
        donor = next;
      } else {
        index.Erase(next);
        arena_.Delete(next);
      }
    }
    if (donor != nullptr) {
      index.Replace(donor, block);
      arena_.Delete(donor);
    } else {
      index.Insert(block);
    }
    CountInactiveSplit(block, +1);
    return absl::OkStatus();
  }

  size_t EmptyCache() {
    internal::MutexLock lock(&mu_);
    return ReleaseCachedSegments();
  }

  MemoryStats GetStats() const {
    internal::MutexLock lock(&mu_);
    MemoryStats stats = stats_;
    // Without streams a block is active exactly while it is allocated, so
    // the hot path keeps only the allocation statistics.
    stats.active = stats.allocation;
    stats.active_bytes = stats.allocated_bytes;
    return stats;
  }

  void ResetPeakStats() {
    internal::MutexLock lock(&mu_);
    for (StatArray* a :
         {&stats_.allocation, &stats_.segment, &stats_.inactive_split,
          &stats_.allocated_bytes, &stats_.reserved_bytes,
          &stats_.inactive_split_bytes, &stats_.requested_bytes}) {
      a->ResetPeak();
    }
  }

 private:
  size_t SplitThreshold(PoolKind pool) const {
    return pool == PoolKind::kSmall ? config_.small_split_threshold
                                    : config_.large_split_threshold;
  }

  // Best fit for `rounded` in `pool` (still in the index); nullptr if no
  // cached block may serve it.
  Block* FindFreeBlock(PoolKind pool, size_t rounded)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    Block* block = free_[static_cast<int>(pool)].BestFit(rounded);
    if (block == nullptr) return nullptr;
    // Larger blocks are larger still, so if the best fit is a non-splittable
    // block that wastes too much, so is every other candidate.
    if (block->size > config_.max_split_size_bytes &&
        block->size - rounded > config_.max_non_split_rounding_bytes) {
      return nullptr;
    }
    return block;
  }

  // Splits off the tail of `block` beyond `rounded` when the rules allow;
  // the new free tail (not yet in the index), or nullptr.
  Block* MaybeSplit(Block* block, size_t rounded)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const size_t remaining = block->size - rounded;
    if (remaining == 0 || remaining < SplitThreshold(block->pool) ||
        block->size > config_.max_split_size_bytes) {
      return nullptr;
    }
    Block* rest = arena_.New(block->addr + rounded, remaining, block,
                             block->next, block->pool);
    if (block->next != nullptr) block->next->prev = rest;
    block->next = rest;
    block->size = rounded;
    return rest;
  }

  // Adds (+1) or removes (-1) the free `block` from the inactive-split
  // statistics if it is part of a split segment.
  void CountInactiveSplit(const Block* block, int sign)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (!block->IsSplit()) return;
    const int64_t bytes = static_cast<int64_t>(block->size);
    if (sign > 0) {
      stats_.inactive_split.Increase(block->pool, 1);
      stats_.inactive_split_bytes.Increase(block->pool, bytes);
    } else {
      stats_.inactive_split.Decrease(block->pool, 1);
      stats_.inactive_split_bytes.Decrease(block->pool, bytes);
    }
  }

  // Merges the neighbour `src` into `dst`; `src` stays in the index and the
  // arena for the caller to deal with.
  static void Merge(Block* dst, Block* src) {
    if (src == dst->prev) {
      dst->addr = src->addr;
      dst->prev = src->prev;
      if (dst->prev != nullptr) dst->prev->next = dst;
    } else {
      dst->next = src->next;
      if (dst->next != nullptr) dst->next->prev = dst;
    }
    dst->size += src->size;
  }

  // A whole new segment for `p` as one (not yet cached) block, flushing the
  // cache and retrying once when the provider is out of memory.
  absl::StatusOr<Block*> NewSegment(const Placement& p)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<void*> segment = provider_->AllocateSegment(p.segment_bytes);
    if (!segment.ok() && absl::IsResourceExhausted(segment.status())) {
      ReleaseCachedSegments();
      ++stats_.num_alloc_retries;
      segment = provider_->AllocateSegment(p.segment_bytes);
    }
    if (!segment.ok()) {
      if (absl::IsResourceExhausted(segment.status())) {
        ++stats_.num_ooms;
        return OutOfMemory(p.requested, p.segment_bytes);
      }
      return absl::Status(
          segment.status().code(),
          absl::StrFormat("neffd allocator: the segment provider failed to "
                          "allocate %d bytes: %s",
                          p.segment_bytes, segment.status().message()));
    }
    ++stats_.num_device_alloc;
    const int64_t bytes = static_cast<int64_t>(p.segment_bytes);
    stats_.segment.Increase(p.pool, 1);
    stats_.reserved_bytes.Increase(p.pool, bytes);
    return arena_.New(reinterpret_cast<uintptr_t>(*segment), p.segment_bytes,
                      nullptr, nullptr, p.pool);
  }

  absl::Status OutOfMemory(size_t requested, size_t asked)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "neffd allocator: out of device memory: requested %d bytes (a segment "
        "of %d bytes), %d bytes allocated, %d bytes reserved, %s bytes free; "
        "free tensors or tune TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG to reduce "
        "fragmentation",
        requested, asked, stats_.allocated_bytes.all().current,
        stats_.reserved_bytes.all().current,
        FormatFreeBytes(provider_->FreeBytes())));
  }

  // Returns every wholly free cached segment; the bytes released.
  size_t ReleaseCachedSegments() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<Block*> whole;
    for (const FreeIndex& index : free_) {
      index.ForEach([&whole](Block* block) {
        if (!block->IsSplit()) whole.push_back(block);
      });
    }
    size_t released = 0;
    for (Block* block : whole) {
      free_[static_cast<int>(block->pool)].Erase(block);
      released += block->size;
      ++stats_.num_device_free;
      stats_.segment.Decrease(block->pool, 1);
      stats_.reserved_bytes.Decrease(block->pool,
                                     static_cast<int64_t>(block->size));
      ReturnToProvider(reinterpret_cast<void*>(block->addr), block->size);
      arena_.Delete(block);
    }
    return released;
  }

  void ReturnToProvider(void* segment, size_t bytes)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::Status status = provider_->FreeSegment(segment, bytes);
    if (!status.ok()) {
      std::fprintf(stderr, "neffd allocator: returning segment %p: %s\n",
                   segment, std::string(status.message()).c_str());
    }
  }

  const SegmentAllocatorConfig config_;
  const size_t divisions_;
  SegmentProvider* const provider_;
  mutable absl::Mutex mu_;
  FreeIndex free_[2] ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uintptr_t, Block*> live_ ABSL_GUARDED_BY(mu_);
  BlockArena arena_ ABSL_GUARDED_BY(mu_);
  MemoryStats stats_ ABSL_GUARDED_BY(mu_);
};

absl::StatusOr<std::unique_ptr<NeuronSegmentPool>> NeuronSegmentPool::Create(
    const SegmentAllocatorConfig& config, SegmentProvider* provider) {
  if (provider == nullptr) {
    return absl::InvalidArgumentError(
        "NeuronSegmentPool::Create: provider is null");
  }
  if (absl::Status s = ValidateSegmentAllocatorConfig(config); !s.ok()) {
    return s;
  }
  return std::unique_ptr<NeuronSegmentPool>(
      new NeuronSegmentPool(std::make_unique<Impl>(config, provider)));
}

absl::StatusOr<std::unique_ptr<NeuronSegmentPool>>
NeuronSegmentPool::CreateFromEnvironment(SegmentProvider* provider) {
  return Create(ProcessSegmentAllocatorConfig().config, provider);
}

NeuronSegmentPool::NeuronSegmentPool(std::unique_ptr<Impl> impl)
    : impl_(std::move(impl)) {}

NeuronSegmentPool::~NeuronSegmentPool() = default;

absl::StatusOr<Allocation> NeuronSegmentPool::Allocate(size_t bytes) {
  return impl_->Allocate(bytes);
}

absl::Status NeuronSegmentPool::Free(void* ptr) { return impl_->Free(ptr); }

size_t NeuronSegmentPool::EmptyCache() { return impl_->EmptyCache(); }

MemoryStats NeuronSegmentPool::GetStats() const { return impl_->GetStats(); }

void NeuronSegmentPool::ResetPeakStats() { impl_->ResetPeakStats(); }

const SegmentAllocatorConfig& NeuronSegmentPool::config() const {
  return impl_->config();
}

}  // namespace neffd::allocator
