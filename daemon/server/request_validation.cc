#include "daemon/server/request_validation.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "store/digest.h"

namespace neffd {

absl::Status ValidateLeaseId(absl::string_view lease_id) {
  if (lease_id.empty()) {
    return absl::InvalidArgumentError("lease_id: is empty");
  }
  if (lease_id.size() > 64) {
    return absl::InvalidArgumentError("lease_id: is longer than 64 bytes");
  }
  return absl::OkStatus();
}

absl::StatusOr<EntryKey> ValidateLockRequest(const v1::LockRequest& request,
                                             const RequestLimits& limits) {
  absl::StatusOr<EntryKey> id = EntryKey::Parse(request.id());
  if (!id.ok()) return id.status();
  if (request.holder().host().size() > limits.max_host_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "holder.host: is longer than ", limits.max_host_bytes, " bytes"));
  }
  return id;
}

absl::Status ValidateStagedPath(const std::string& staging_dir,
                                const std::string& path) {
  size_t slash = path.rfind('/');
  if (path.empty() || path[0] != '/' || slash == std::string::npos ||
      path.compare(0, slash, staging_dir) != 0 || slash != staging_dir.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "staged_path: '", absl::CHexEscape(path),
        "' is not a file directly inside the staging directory ", staging_dir));
  }
  return ValidateToken("staged_path",
                       absl::string_view(path).substr(slash + 1));
}

absl::StatusOr<EntryKey> ValidatePublishRequest(
    const v1::PublishRequest& request, const RequestLimits& limits,
    const std::string& staging_dir) {
  absl::StatusOr<EntryKey> id = EntryKey::Parse(request.id());
  if (!id.ok()) return id.status();
  if (absl::Status s = ValidateLeaseId(request.lease_id()); !s.ok()) return s;
  // Optional: without it the daemon's digest of the bytes is the entry's
  // (the client need not read a large NEFF a second time).
  if (!request.sha256().empty() && !IsSha256Hex(request.sha256())) {
    return absl::InvalidArgumentError(
        "sha256: must be 64 lowercase hex digits, or empty");
  }
  if (request.size() > limits.max_entry_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "size: %d bytes is over the limit of %d (--max_entry_bytes)",
        request.size(), limits.max_entry_bytes));
  }
  switch (request.content_case()) {
    case v1::PublishRequest::CONTENT_NOT_SET:
      return absl::InvalidArgumentError(
          "content: set staged_path or inline_bytes");
    case v1::PublishRequest::kInlineBytes:
      if (request.inline_bytes().size() > limits.max_inline_bytes) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "inline_bytes: %d bytes is over the inline limit of %d; stage a "
            "file",
            request.inline_bytes().size(), limits.max_inline_bytes));
      }
      if (request.inline_bytes().size() != request.size()) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "size: inline_bytes has %d bytes; the request says %d",
            request.inline_bytes().size(), request.size()));
      }
      break;
    default:
      if (absl::Status s =
              ValidateStagedPath(staging_dir, request.staged_path());
          !s.ok()) {
        return s;
      }
      break;
  }
  if (request.metadata_size() > limits.max_metadata_entries) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata: at most ", limits.max_metadata_entries, " entries"));
  }
  size_t metadata_bytes = 0;
  for (const auto& [key, value] : request.metadata()) {
    if (key.empty() || key.size() > limits.max_metadata_key_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata: key '", absl::CHexEscape(key.substr(0, 32)), "' is ",
          key.size(), " bytes; keys are 1..", limits.max_metadata_key_bytes));
    }
    if (value.size() > limits.max_metadata_value_bytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          "metadata[", key, "]: is ", value.size(),
          " bytes, over the limit of ", limits.max_metadata_value_bytes));
    }
    metadata_bytes += key.size() + value.size();
  }
  if (metadata_bytes > limits.max_metadata_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metadata: ", metadata_bytes, " bytes in all, over the limit of ",
        limits.max_metadata_bytes));
  }
  return id;
}

absl::StatusOr<EntryKey> ValidateUnlockRequest(const v1::UnlockRequest& request,
                                               const RequestLimits& limits) {
  absl::StatusOr<EntryKey> id = EntryKey::Parse(request.id());
  if (!id.ok()) return id.status();
  if (absl::Status s = ValidateLeaseId(request.lease_id()); !s.ok()) return s;
  if (request.outcome() != v1::UnlockRequest::ABANDONED &&
      request.outcome() != v1::UnlockRequest::FAILED) {
    return absl::InvalidArgumentError("outcome: must be ABANDONED or FAILED");
  }
  if (request.log().size() > limits.max_log_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("log: is ", request.log().size(),
                     " bytes, over the limit of ", limits.max_log_bytes,
                     "; send its last ", limits.max_log_bytes, " bytes"));
  }
  return id;
}

}  // namespace neffd
