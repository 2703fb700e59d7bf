// daemon/s3/remote_layout.h
//
// Where cache entries live in S3. `--remote=s3://BUCKET/PREFIX` names the
// place; under it the layout mirrors the shared store's (TorchNeuron's,
// store/layout.h), so a synced copy of the bucket is a cache TorchNeuron
// reads as it is:
//
//   PREFIX/{k0k1}/{k2k3}/{key}.neff
//   PREFIX/{k0k1}/{k2k3}/{key}.neffd/model.done
//                                   /compile_flags.json
//
// The hlo namespace has a root of its own in the shared store; remotely it
// lives under PREFIX/hlo/ (no shard name has three characters), with
// {key}.hlo as its artifact.
//
// Thread-safe (pure functions and a value type).
#ifndef NEFFD_DAEMON_S3_REMOTE_LAYOUT_H_
#define NEFFD_DAEMON_S3_REMOTE_LAYOUT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "store/entry_id.h"

namespace neffd::remote {

struct RemoteLocation {
  std::string bucket;
  // Without leading or trailing '/'; empty for the bucket's root.
  std::string prefix;

  // "s3://BUCKET/PREFIX", for logs and stats.
  std::string Url() const;
};

// Parses a --remote value. InvalidArgument naming --remote when it is not
// s3://, the bucket is not a valid S3 bucket name (3-63 of [a-z0-9.-],
// starting and ending with a letter or digit) or the prefix has an empty,
// "." or ".." segment or a control character. A trailing '/' is dropped.
absl::StatusOr<RemoteLocation> ParseRemoteUrl(absl::string_view url);

enum class RemoteFile {
  kArtifact,      // model.neff / model.hlo
  kDoneRecord,    // model.done, written last
  kCompileFlags,  // compile_flags.json
};

// The object name of one file of an entry.
std::string RemoteObjectName(const RemoteLocation& location,
                             const EntryKey& key, RemoteFile file);

}  // namespace neffd::remote

#endif  // NEFFD_DAEMON_S3_REMOTE_LAYOUT_H_
