#include "daemon/cluster/access_journal.h"

#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "store/file_util.h"

namespace neffd {
namespace {

constexpr char kJournalDir[] = ".access";
// A journal holds one short line per entry; this bounds what a damaged or
// foreign file can make the evictor read.
constexpr size_t kMaxJournalBytes = 64 << 20;

}  // namespace

AccessJournal::AccessJournal(AccessJournalOptions options)
    : options_(std::move(options)) {}

std::string AccessJournal::KeyOf(const EntryKey& id) {
  return absl::StrCat(id.compiler_version(), "/", id.key());
}

std::string AccessJournal::path() const {
  return absl::StrCat(options_.root, "/", kJournalDir, "/", options_.host_id);
}

absl::Duration AccessJournal::lag() const {
  return options_.grain + options_.min_spacing + options_.catalog_flush;
}

void AccessJournal::Note(
    const absl::flat_hash_map<std::string, absl::Time>& accessed) {
  absl::MutexLock lock(&mu_);
  for (const auto& [canonical, when] : accessed) {
    absl::StatusOr<EntryKey> id = EntryKey::FromCanonical(canonical);
    if (!id.ok() || id->ns() != options_.ns) continue;
    absl::Time& recorded = journaled_[KeyOf(*id)];
    if (when - recorded < options_.grain) continue;
    recorded = when;
    news_ = true;
  }
}

absl::Status AccessJournal::Flush(absl::Time now, bool force) {
  std::string text;
  {
    absl::MutexLock lock(&mu_);
    if (!news_ || (!force && now - last_write_ < options_.min_spacing)) {
      return absl::OkStatus();
    }
    absl::erase_if(journaled_, [&](const auto& kv) {
      return now - kv.second > options_.horizon;
    });
    for (const auto& [key, when] : journaled_) {
      const size_t slash = key.find('/');
      absl::StrAppend(&text, absl::ToUnixSeconds(when), " ",
                      key.substr(0, slash), " ", key.substr(slash + 1), "\n");
    }
    news_ = false;
    last_write_ = now;
  }
  const std::string dir = absl::StrCat(options_.root, "/", kJournalDir);
  // A rewrite is two metadata operations (create the temp file, rename it
  // over the journal); the directory is made only the first time.
  absl::Status written =
      WriteFileAtomically(dir, options_.host_id, text, options_.host_id,
                          /*durable=*/false, options_.env);
  if (!absl::IsNotFound(written)) return written;
  if (absl::Status s = MakeDirs(dir, 0755, options_.env); !s.ok()) return s;
  return WriteFileAtomically(dir, options_.host_id, text, options_.host_id,
                             /*durable=*/false, options_.env);
}

LastUses AccessJournal::ReadAll(const std::string& root,
                                const std::string& self, uint64_t* journals,
                                Env* env) {
  LastUses merged;
  *journals = 0;
  const std::string dir = absl::StrCat(root, "/", kJournalDir);
  absl::StatusOr<std::vector<std::string>> names = env->ListDir(dir);
  if (!names.ok()) return merged;  // no host has written one yet
  for (const std::string& host : *names) {
    // Temp files of a rewrite in progress start with '.'.
    if (host.empty() || host[0] == '.' || host == self) continue;
    absl::StatusOr<std::string> text =
        ReadSmallFile(absl::StrCat(dir, "/", host), kMaxJournalBytes, env);
    if (!text.ok()) continue;  // replaced or removed meanwhile
    ++*journals;
    for (absl::string_view line : absl::StrSplit(*text, '\n')) {
      std::vector<absl::string_view> f =
          absl::StrSplit(line, ' ', absl::SkipEmpty());
      int64_t seconds = 0;
      if (f.size() != 3 || !absl::SimpleAtoi(f[0], &seconds)) continue;
      absl::Time& latest = merged[absl::StrCat(f[1], "/", f[2])];
      latest = std::max(latest, absl::FromUnixSeconds(seconds));
    }
  }
  return merged;
}

}  // namespace neffd
