// store/counting_env.h
//
// CountingEnv counts the filesystem calls made through it, by kind. The
// store's and the daemon's "metadata operations" figures (Store::
// metadata_ops(), the store_metadata_ops stat) are its metadata_ops(): the
// calls that cost a round trip to a shared filesystem's metadata server.
// They are every call that names a path (open, stat, lstat, access, rename,
// link, unlink, mkdir, rmdir, listing a directory), an fsync of a directory,
// and setting a file's times or mode. Calls on data or on an open
// descriptor's cached attributes (write, fsync of a file, fstat, flock,
// statvfs) are counted by kind but are not metadata operations.
//
// Calls are counted when they are made, whether or not they succeed. It
// also counts the threads started through it (threads_started()).
// Thread-safe.
#ifndef NEFFD_STORE_COUNTING_ENV_H_
#define NEFFD_STORE_COUNTING_ENV_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <utility>

#include "store/env.h"

namespace neffd {

// True for the kinds of call CountingEnv::metadata_ops() counts.
bool IsMetadataOp(FsOp op);

class CountingEnv : public EnvWrapper {
 public:
  explicit CountingEnv(Env* target) : EnvWrapper(target) {}

  uint64_t calls(FsOp op) const {
    return calls_[static_cast<int>(op)].load(std::memory_order_relaxed);
  }
  uint64_t metadata_ops() const;
  uint64_t threads_started() const {
    return threads_started_.load(std::memory_order_relaxed);
  }

  EnvThread StartThread(absl::string_view name,
                        std::function<void()> body) override {
    threads_started_.fetch_add(1, std::memory_order_relaxed);
    return EnvWrapper::StartThread(name, std::move(body));
  }

 protected:
  absl::Status BeforeCall(const FsCall& call) override {
    calls_[static_cast<int>(call.op)].fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }

 private:
  std::array<std::atomic<uint64_t>, kNumFsOps> calls_{};
  std::atomic<uint64_t> threads_started_{0};
};

}  // namespace neffd

#endif  // NEFFD_STORE_COUNTING_ENV_H_
