#include "client/fs_backend.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace neffd {

// Holds the entry's lock file; the lock drops when the lease is destroyed.
class FilesystemBackend::FsLease : public Lease {
 public:
  FsLease(Store* store, EntryKey id, FileLock lock, std::string host)
      : store_(store),
        id_(std::move(id)),
        lock_(std::move(lock)),
        host_(std::move(host)) {}

  absl::StatusOr<v1::Entry> Publish(
      const std::string& path, const CopyResult& content,
      const std::map<std::string, std::string>& metadata,
      FileAfterPublish) override {
    // The store makes its own copy (in the kernel): the file stays.
    UniqueFd fd(open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!fd.valid()) return absl::ErrnoToStatus(errno, "opening " + path);
    absl::StatusOr<PublishResult> published = store_->PublishFromFd(
        id_, fd.get(), content.size, content.sha256,
        Producer{host_, static_cast<int64_t>(getpid())}, metadata);
    if (!published.ok()) return published.status();
    lock_.Release();
    return published->stored.entry;
  }

  absl::StatusOr<v1::Failure> Fail(const std::string& log) override {
    absl::StatusOr<v1::Failure> failure = store_->RecordFailure(id_, log);
    lock_.Release();
    if (!failure.ok()) return failure;
    // As later callers will read it (the retry-after from model.log's mtime).
    return store_->FindFailure(id_).value_or(*failure);
  }

 private:
  Store* const store_;
  const EntryKey id_;
  FileLock lock_;
  const std::string host_;
};

FilesystemBackend::FilesystemBackend(FilesystemBackendOptions options)
    : options_(std::move(options)) {}

absl::StatusOr<Store*> FilesystemBackend::StoreFor(Namespace ns) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<Store>& store = ns == Namespace::kNeff ? neff_ : hlo_;
  if (store == nullptr) {
    StoreOptions o;
    o.root = ns == Namespace::kNeff ? options_.neff_cache_dir
                                    : options_.hlo_cache_dir;
    o.ns = ns;
    o.host_id = options_.host;
    o.failed_ttl = options_.failed_ttl;
    o.env = options_.env;
    absl::StatusOr<std::unique_ptr<Store>> opened = Store::Open(o);
    if (!opened.ok()) return opened.status();
    store = *std::move(opened);
  }
  return store.get();
}

absl::StatusOr<v1::LookupResponse> FilesystemBackend::Lookup(
    const EntryKey& id) {
  return LookupIn(id, Store::OnDamage::kReport);
}

absl::StatusOr<v1::LookupResponse> FilesystemBackend::LookupIn(
    const EntryKey& id, Store::OnDamage on_damage) {
  absl::StatusOr<Store*> store = StoreFor(id.ns());
  if (!store.ok()) return store.status();
  v1::LookupResponse response;
  absl::StatusOr<StoredEntry> found = (*store)->Find(id, on_damage);
  if (found.ok()) {
    response.set_result(v1::LookupResponse::HIT);
    *response.mutable_entry() = found->entry;
  } else if (!absl::IsNotFound(found.status()) &&
             !absl::IsDataLoss(found.status())) {
    return found.status();
  } else if (std::optional<v1::Failure> failure = (*store)->FindFailure(id)) {
    response.set_result(v1::LookupResponse::FAILED);
    *response.mutable_failure() = *std::move(failure);
  } else {
    response.set_result(v1::LookupResponse::MISS);
  }
  return response;
}

absl::StatusOr<LockAnswer> FilesystemBackend::Lock(const EntryKey& id,
                                                   absl::Duration wait) {
  absl::StatusOr<Store*> store = StoreFor(id.ns());
  if (!store.ok()) return store.status();
  // Resolved keys need no lock; the check is repeated under the lock because
  // the previous holder may just have published or failed. Damaged entries
  // are quarantined only under the lock: a check outside it may have raced a
  // new publish, which a quarantine by name would then move aside.
  auto answer_from_store =
      [&](LockAnswer* answer,
          Store::OnDamage on_damage) -> absl::StatusOr<bool> {
    absl::StatusOr<v1::LookupResponse> found = LookupIn(id, on_damage);
    if (!found.ok()) return found.status();
    if (found->result() == v1::LookupResponse::HIT) {
      answer->outcome = v1::LockResponse::READY;
      answer->entry = found->entry();
      return true;
    }
    if (found->result() == v1::LookupResponse::FAILED) {
      answer->outcome = v1::LockResponse::FAILED;
      answer->failure = found->failure();
      return true;
    }
    return false;
  };
  LockAnswer answer;
  absl::StatusOr<bool> answered =
      answer_from_store(&answer, Store::OnDamage::kReport);
  if (!answered.ok()) return answered.status();
  if (*answered) {
    answer.at_once = true;
    return answer;
  }
  const absl::Time deadline = wait > absl::ZeroDuration()
                                  ? options_.env->Now() + wait
                                  : absl::InfinitePast();
  bool checked_unlocked = false;
  for (;;) {
    absl::StatusOr<FileLock> lock = LockEntry(
        absl::StrCat(options_.local_dir, "/locks"), id, deadline, options_.env);
    if (!lock.ok()) return lock.status();
    if (!lock->held()) {
      answer.outcome = wait > absl::ZeroDuration() ? v1::LockResponse::TIMED_OUT
                                                   : v1::LockResponse::BUSY;
      return answer;
    }
    // The previous holder may just have published or failed. If so, the
    // entry is verified (the whole NEFF hashed) after letting the lock go:
    // under it, every waiter of the host would verify one after another
    // instead of all at once. Once only, so a record that cannot be
    // quarantined does not make waiters spin.
    if (!checked_unlocked &&
        ((*store)->HasDoneRecord(id) || (*store)->FindFailure(id))) {
      checked_unlocked = true;
      lock->Release();
      answered = answer_from_store(&answer, Store::OnDamage::kReport);
      if (!answered.ok()) return answered.status();
      if (*answered) return answer;
      continue;  // damaged: compete for the lock again to quarantine it
    }
    answered = answer_from_store(&answer, Store::OnDamage::kQuarantine);
    if (!answered.ok()) return answered.status();
    if (*answered) return answer;
    answer.outcome = v1::LockResponse::GRANTED;
    answer.lease =
        std::make_unique<FsLease>(*store, id, *std::move(lock), options_.host);
    return answer;
  }
}

}  // namespace neffd
