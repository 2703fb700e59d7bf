#include "daemon/locks/wake_notices.h"

#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"

namespace neffd {

namespace {
constexpr size_t kMaxKeptAnswered = 1024;
}  // namespace

WakeNotices::WakeNotices(Env* env, std::string dir,
                         absl::Duration keep_answered)
    : env_(env), dir_(std::move(dir)), keep_answered_(keep_answered) {}

absl::Status WakeNotices::RemoveLeftovers() {
  absl::StatusOr<std::vector<std::string>> names = env_->ListDir(dir_);
  if (!names.ok()) return names.status();
  for (const std::string& name : *names) {
    absl::Status s = env_->Unlink(absl::StrCat(dir_, "/", name));
    if (!s.ok() && !absl::IsNotFound(s)) return s;
  }
  return absl::OkStatus();
}

absl::StatusOr<WakeNotices::Notice> WakeNotices::Join(const EntryKey& id) {
  absl::MutexLock lock(&mu_);
  auto open = open_.find(id.Canonical());
  if (open != open_.end()) return open->second;
  // A name no other notice of this daemon had: a waiter holding an old path
  // finds it gone, never another key's notice.
  const std::string path = absl::StrCat(dir_, "/", getpid(), ".", ++created_);
  // 0440 in the directory's group: the ranks read it, nobody writes it.
  absl::StatusOr<std::unique_ptr<WakeNotice>> created =
      WakeNotice::Create(env_, path, 0440);
  if (!created.ok()) return created.status();
  Notice notice = *std::move(created);
  open_[id.Canonical()] = notice;
  return notice;
}

void WakeNotices::Answer(const EntryKey& id, const Notice& notice,
                         absl::string_view answer) {
  if (!notice->Answer(answer)) return;
  std::deque<std::pair<absl::Time, Notice>> expired;
  absl::MutexLock lock(&mu_);
  auto open = open_.find(id.Canonical());
  if (open != open_.end() && open->second == notice) open_.erase(open);
  const absl::Time now = env_->Now();
  while (!answered_.empty() &&
         (answered_.size() >= kMaxKeptAnswered ||
          now - answered_.front().first > keep_answered_)) {
    // Released after the mutex: the last reference removes the file.
    expired.push_back(std::move(answered_.front()));
    answered_.pop_front();
  }
  answered_.emplace_back(now, notice);
}

}  // namespace neffd
