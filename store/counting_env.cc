#include "store/counting_env.h"

namespace neffd {

bool IsMetadataOp(FsOp op) {
  switch (op) {
    case FsOp::kOpen:
    case FsOp::kStat:
    case FsOp::kLstat:
    case FsOp::kAccess:
    case FsOp::kRename:
    case FsOp::kLink:
    case FsOp::kUnlink:
    case FsOp::kMkdir:
    case FsOp::kRmdir:
    case FsOp::kListDir:
    case FsOp::kSyncDir:
    case FsOp::kTouch:
    case FsOp::kChmod:
      return true;
    case FsOp::kFstat:
    case FsOp::kWrite:
    case FsOp::kSync:
    case FsOp::kLock:
    case FsOp::kStatFs:
      return false;
  }
  return false;
}

uint64_t CountingEnv::metadata_ops() const {
  uint64_t total = 0;
  for (int op = 0; op < kNumFsOps; ++op) {
    if (IsMetadataOp(static_cast<FsOp>(op))) {
      total += calls_[op].load(std::memory_order_relaxed);
    }
  }
  return total;
}

}  // namespace neffd
