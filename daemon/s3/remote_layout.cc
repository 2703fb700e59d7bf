#include "daemon/s3/remote_layout.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "store/layout.h"
#include "store/store.h"

namespace neffd::remote {
namespace {

absl::Status BadRemote(absl::string_view url, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--remote=", url, ": ", why));
}

bool IsBucketName(absl::string_view bucket) {
  auto alnum = [](char c) {
    return absl::ascii_islower(c) || absl::ascii_isdigit(c);
  };
  if (bucket.size() < 3 || bucket.size() > 63) return false;
  if (!alnum(bucket.front()) || !alnum(bucket.back())) return false;
  for (char c : bucket) {
    if (!alnum(c) && c != '.' && c != '-') return false;
  }
  return true;
}

}  // namespace

std::string RemoteLocation::Url() const {
  return prefix.empty() ? absl::StrCat("s3://", bucket)
                        : absl::StrCat("s3://", bucket, "/", prefix);
}

absl::StatusOr<RemoteLocation> ParseRemoteUrl(absl::string_view url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "s3://")) {
    return BadRemote(url, "expected s3://BUCKET/PREFIX");
  }
  rest = absl::StripSuffix(rest, "/");
  std::pair<absl::string_view, absl::string_view> parts =
      absl::StrSplit(rest, absl::MaxSplits('/', 1));
  if (!IsBucketName(parts.first)) {
    return BadRemote(url, absl::StrCat("'", parts.first,
                                       "' is not an S3 bucket name (3-63 of "
                                       "a-z 0-9 . -, starting and ending with "
                                       "a letter or digit)"));
  }
  if (!parts.second.empty()) {
    for (absl::string_view segment : absl::StrSplit(parts.second, '/')) {
      if (segment.empty() || segment == "." || segment == "..") {
        return BadRemote(url, absl::StrCat("prefix '", parts.second,
                                           "' has an empty, '.' or '..' part"));
      }
    }
    for (char c : parts.second) {
      if (absl::ascii_iscntrl(c)) {
        return BadRemote(url, "prefix has a control character");
      }
    }
  }
  return RemoteLocation{std::string(parts.first), std::string(parts.second)};
}

std::string RemoteObjectName(const RemoteLocation& location,
                             const EntryKey& key, RemoteFile file) {
  std::string root = location.prefix;
  if (key.ns() == Namespace::kHlo) {
    root = root.empty() ? "hlo" : absl::StrCat(root, "/hlo");
  }
  if (!root.empty()) absl::StrAppend(&root, "/");
  switch (file) {
    case RemoteFile::kArtifact:
      return absl::StrCat(root, ArtifactRelPath(key.ns(), key.key()));
    case RemoteFile::kDoneRecord:
      return absl::StrCat(root, RecordsRelDir(key.key()), "/model.done");
    case RemoteFile::kCompileFlags:
      return absl::StrCat(root, RecordsRelDir(key.key()), "/",
                          kKeyInputsFileName);
  }
  return root;
}

}  // namespace neffd::remote
