// tests/harness/store_files.h
//
// Where the shared store keeps one entry's files (store/layout.h), for tests
// that look at, plant or damage them on disk the way an operator, an
// unmodified TorchNeuron rank or a hostile writer would.
//
// Thread-safe (pure).
#ifndef NEFFD_TESTS_HARNESS_STORE_FILES_H_
#define NEFFD_TESTS_HARNESS_STORE_FILES_H_

#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "store/layout.h"
#include "store/lock_paths.h"

namespace neffd::test_support {

struct EntryFiles {
  std::string artifact;  // {root}/{k0k1}/{k2k3}/{key}.neff (or .hlo)
  std::string shard;     // the directory holding it
  std::string records;   // {root}/{k0k1}/{k2k3}/{key}.neffd
  std::string done;      // records/model.done
  std::string log;       // records/model.log
  std::string key_inputs;
  std::string lease;
};

inline EntryFiles FilesOf(const std::string& root, absl::string_view key,
                          Namespace ns = Namespace::kNeff) {
  EntryFiles f;
  f.shard = absl::StrCat(root, "/", ShardDir(key));
  f.artifact = absl::StrCat(root, "/", ArtifactRelPath(ns, key));
  f.records = absl::StrCat(root, "/", RecordsRelDir(key));
  f.done = f.records + "/model.done";
  f.log = f.records + "/model.log";
  f.key_inputs = f.records + "/compile_flags.json";
  f.lease = absl::StrCat(f.records, "/", kLeaseFileName);
  return f;
}

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_HARNESS_STORE_FILES_H_
