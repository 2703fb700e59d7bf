// neffctl's data commands: lookup, put, get.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "client/neffctl/ctl.h"
#include "store/digest.h"
#include "store/file_util.h"

namespace neffd::ctl {
namespace {

void PrintFailure(const v1::Failure& failure) {
  std::printf("FAILED (recorded compile failure; retry after %s)\n%s\n",
              RetryAfter(failure).c_str(), failure.log().c_str());
}

}  // namespace

int Ctl::Lookup(const EntryKey& id) {
  v1::LookupRequest request;
  *request.mutable_id() = id.ToProto();
  v1::LookupResponse response;
  grpc::Status status =
      cache_->Lookup(Context(absl::Seconds(60)).get(), request, &response);
  if (!status.ok()) return RpcFailure(status, address_);
  const v1::Entry& e = response.entry();
  const char* result =
      v1::LookupResponse::Result_Name(response.result()).c_str();
  if (json_) {
    if (response.result() == v1::LookupResponse::HIT) {
      PrintFields({{"result", Str(result)},
                   {"path", Str(e.path())},
                   {"size", Num(e.size())},
                   {"sha256", Str(e.sha256())}});
    } else if (response.result() == v1::LookupResponse::FAILED) {
      PrintFields({{"result", Str(result)},
                   {"log", Str(response.failure().log())},
                   {"retry_after_unix_ms",
                    Num(response.failure().retry_after_unix_ms())}});
    } else {
      PrintFields({{"result", Str(result)}});
    }
  } else if (response.result() == v1::LookupResponse::HIT) {
    std::printf("HIT %s (%llu bytes, sha256 %s)\n", e.path().c_str(),
                static_cast<unsigned long long>(e.size()), e.sha256().c_str());
  } else if (response.result() == v1::LookupResponse::FAILED) {
    PrintFailure(response.failure());
  } else {
    std::printf("MISS\n");
  }
  return response.result() == v1::LookupResponse::HIT ? kOk : kMiss;
}

void Ctl::Abandon(const EntryKey& id, const std::string& lease_id) {
  v1::UnlockRequest unlock;
  unlock.set_lease_id(lease_id);
  *unlock.mutable_id() = id.ToProto();
  unlock.set_outcome(v1::UnlockRequest::ABANDONED);
  v1::UnlockResponse ignored;
  (void)cache_->Unlock(Context(absl::Seconds(10)).get(), unlock, &ignored);
}

int Ctl::PublishStaged(const EntryKey& id, const v1::Lease& lease,
                       const std::string& file, uint64_t size,
                       const std::string& sha256,
                       v1::PublishResponse* published) {
  v1::PublishRequest request;
  request.set_lease_id(lease.lease_id());
  *request.mutable_id() = id.ToProto();
  request.set_size(size);
  request.set_sha256(sha256);
  UniqueFd in(open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid())
    return Complain(kBadInput, absl::ErrnoToStatus(errno, file).message());
  std::string staged;
  if (id.ns() == Namespace::kHlo && size <= (16u << 20)) {
    absl::StatusOr<std::string> bytes = ReadSmallFile(file, 16u << 20);
    if (!bytes.ok()) return Complain(kBadInput, bytes.status().message());
    request.set_inline_bytes(*std::move(bytes));
  } else {
    staged = absl::StrCat(lease.staging_dir(), "/",
                          UniqueTempName(id.key(), "neffctl").substr(1));
    UniqueFd out(open(staged.c_str(),
                      O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      0640));
    if (!out.valid()) {
      return Complain(
          kFailed, absl::ErrnoToStatus(errno, "staging " + staged).message());
    }
    absl::StatusOr<CopyResult> copied = CopyAndHash(in.get(), out.get(), file);
    if (!copied.ok() || copied->sha256 != sha256) {
      unlink(staged.c_str());
      return Complain(kFailed, absl::StrCat(file, " changed while staging it"));
    }
    request.set_staged_path(staged);
  }
  grpc::Status status =
      cache_->Publish(Context(absl::Hours(1)).get(), request, published);
  if (!status.ok()) {
    if (!staged.empty()) unlink(staged.c_str());
    return RpcFailure(status, address_);
  }
  return kOk;
}

int Ctl::Put(const EntryKey& id, const std::string& file) {
  UniqueFd in(open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid())
    return Complain(kBadInput, absl::ErrnoToStatus(errno, file).message());
  absl::StatusOr<CopyResult> content = CopyAndHash(in.get(), -1, file);
  if (!content.ok()) return Complain(kBadInput, content.status().message());

  v1::LockRequest lock;
  *lock.mutable_id() = id.ToProto();
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  lock.mutable_holder()->set_host(host);
  lock.mutable_holder()->set_pid(getpid());
  lock.mutable_holder()->set_rank(-1);
  lock.set_wait(true);
  v1::LockResponse locked;
  grpc::ClientContext lock_context;  // the daemon bounds the wait
  grpc::Status status = cache_->Lock(&lock_context, lock, &locked);
  if (!status.ok()) return RpcFailure(status, address_);

  std::string outcome;
  v1::Entry entry;
  switch (locked.outcome()) {
    case v1::LockResponse::GRANTED: {
      v1::PublishResponse published;
      int rc = PublishStaged(id, locked.lease(), file, content->size,
                             content->sha256, &published);
      if (rc != kOk) {
        Abandon(id, locked.lease().lease_id());
        return rc;
      }
      outcome = v1::PublishResponse::Outcome_Name(published.outcome());
      entry = published.entry();
      break;
    }
    case v1::LockResponse::READY:
      outcome = "ALREADY_CACHED";
      entry = locked.entry();
      break;
    case v1::LockResponse::FAILED:
      if (!json_) PrintFailure(locked.failure());
      return kMiss;
    default:
      return Complain(
          kMiss, absl::StrCat("lock ",
                              v1::LockResponse::Outcome_Name(locked.outcome()),
                              "; nothing published"));
  }
  if (json_) {
    PrintFields({{"outcome", Str(outcome)},
                 {"path", Str(entry.path())},
                 {"sha256", Str(entry.sha256())}});
  } else {
    std::printf("%s %s (sha256 %s)\n", outcome.c_str(), entry.path().c_str(),
                entry.sha256().c_str());
  }
  return kOk;
}

int Ctl::Get(const EntryKey& id, const std::string& out_path) {
  v1::LookupRequest request;
  *request.mutable_id() = id.ToProto();
  v1::LookupResponse response;
  grpc::Status status =
      cache_->Lookup(Context(absl::Seconds(60)).get(), request, &response);
  if (!status.ok()) return RpcFailure(status, address_);
  if (response.result() != v1::LookupResponse::HIT) {
    if (json_) {
      PrintFields({{"result",
                    Str(v1::LookupResponse::Result_Name(response.result()))}});
    } else {
      std::printf("%s\n",
                  v1::LookupResponse::Result_Name(response.result()).c_str());
    }
    return kMiss;
  }
  const v1::Entry& e = response.entry();
  UniqueFd in(open(e.path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid())
    return Complain(kFailed, absl::ErrnoToStatus(errno, e.path()).message());
  // Write beside the destination, then rename: OUT is whole or untouched.
  std::string tmp = absl::StrCat(out_path, ".neffctl-tmp");
  UniqueFd out(
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out.valid())
    return Complain(kBadInput, absl::ErrnoToStatus(errno, out_path).message());
  absl::StatusOr<CopyResult> copied =
      CopyAndHash(in.get(), out.get(), e.path());
  if (!copied.ok() || copied->sha256 != e.sha256()) {
    unlink(tmp.c_str());
    return Complain(kFailed, absl::StrCat(e.path(),
                                          " did not match its sha256; not "
                                          "written"));
  }
  if (rename(tmp.c_str(), out_path.c_str()) != 0) {
    unlink(tmp.c_str());
    return Complain(kBadInput, absl::ErrnoToStatus(errno, out_path).message());
  }
  if (json_) {
    PrintFields({{"result", Str("HIT")},
                 {"path", Str(out_path)},
                 {"size", Num(e.size())},
                 {"sha256", Str(e.sha256())}});
  } else {
    std::printf("wrote %s (%llu bytes)\n", out_path.c_str(),
                static_cast<unsigned long long>(e.size()));
  }
  return kOk;
}

}  // namespace neffd::ctl
