// client/neffcc/import.h
//
// Files an existing libneuronxla cache (the "Neuron Persistent Cache":
// {dir}/neuronxcc-{version}/MODULE_{hash}+{flagshash}/ holding
// model.hlo_module.pb, compile_flags.json, model.neff, model.done and, from
// --enable-internal-neff-wrapper compiles, wrapped_neff.hlo) under the keys
// neffcc derives for the same compiles, so that the same graph compiled
// through neffcc is then a hit (`neffctl import DIR` for a DIR that is not
// the daemon's store).
//
// The compile each entry stands for is the one libneuronxla runs:
// `neuronx-cc compile --framework=XLA model.hlo_module.pb --output
// model.neff FLAGS...` with FLAGS from compile_flags.json (a JSON list of
// strings; --framework=XLA is added unless they name a framework). Its key is
// DeriveCompileKey's over model.hlo_module.pb's bytes, with the version of
// the directory name; the entry is published through CacheClient (one
// publish per key, concurrent importers and compiles included) as the NEFF,
// or the bundle of NEFF and wrapped_neff.hlo (outputs.h) as neffcc would
// have made it. An entry without model.done, the NEFF or the input, or with
// unreadable flags, is incomplete; one with model.log and no NEFF is a failed
// compile: both are counted, named in `skipped` and left alone.
//
// Thread-compatible.
#ifndef NEFFD_CLIENT_NEFFCC_IMPORT_H_
#define NEFFD_CLIENT_NEFFCC_IMPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/cache_client.h"

namespace neffd::neffcc {

struct LibneuronxlaImport {
  uint64_t scanned = 0;              // MODULE_ directories
  uint64_t imported = 0;             // published now
  uint64_t cached = 0;               // their key was cached already
  uint64_t failed = 0;               // failed compiles (model.log, no NEFF)
  uint64_t incomplete = 0;           // half-written or unreadable
  std::vector<std::string> skipped;  // "PATH: why", one per skipped entry
};

// True when `dir` holds a neuronxcc-* directory.
bool LooksLikeLibneuronxlaCache(const std::string& dir);

// Errors are those that stop the whole import (the cache cannot be
// published to); a bad entry is counted instead.
absl::StatusOr<LibneuronxlaImport> ImportLibneuronxlaCache(
    CacheClient& client, const std::string& dir);

}  // namespace neffd::neffcc

#endif  // NEFFD_CLIENT_NEFFCC_IMPORT_H_
