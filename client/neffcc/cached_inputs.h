// client/neffcc/cached_inputs.h
//
// The key-inputs records of the cached neff entries, for explaining a miss
// (client/explain.h). From the daemon: every page of
// CacheAdmin.ListEntries(namespace "neff"), each entry's kKeyInputsMetadata.
// Without a daemon: the compile_flags.json of every entry directory of the
// shared store (a scan of the store, which is slow on a large cache but only
// runs under NEFFD_EXPLAIN=1 or NEFFD_NO_COMPILE=1). Entries without a record
// (published by other clients) are left out. Best effort: what cannot be read
// is skipped.
//
// Thread-safe.
#ifndef NEFFD_CLIENT_NEFFCC_CACHED_INPUTS_H_
#define NEFFD_CLIENT_NEFFCC_CACHED_INPUTS_H_

#include <vector>

#include "client/cache_client.h"
#include "client/explain.h"

namespace neffd::neffcc {

std::vector<CachedKey> CachedKeyInputs(const CacheClientOptions& options);

}  // namespace neffd::neffcc

#endif  // NEFFD_CLIENT_NEFFCC_CACHED_INPUTS_H_
