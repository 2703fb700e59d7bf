#include "client/neffcc/cached_inputs.h"

#include <chrono>
#include <memory>

#include "client/daemon_channel.h"
#include "grpcpp/grpcpp.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "store/file_util.h"
#include "store/store.h"

namespace neffd::neffcc {
namespace {

constexpr uint32_t kPageSize = 1000;
constexpr size_t kMaxRecordBytes = 1 << 20;
constexpr absl::Duration kCallTimeout = absl::Seconds(30);

void AddRecord(const std::string& key, absl::string_view json,
               std::vector<CachedKey>& out) {
  absl::StatusOr<v1::KeyInputsRecord> record = KeyInputsFromJson(json);
  if (record.ok()) out.push_back(CachedKey{key, *std::move(record)});
}

// False if the daemon could not be asked.
bool FromDaemon(const CacheClientOptions& options,
                std::vector<CachedKey>& out) {
  std::unique_ptr<v1::CacheAdmin::Stub> admin = v1::CacheAdmin::NewStub(
      ConnectToDaemon(ResolveDaemonAddress(options.address)));
  v1::ListEntriesRequest request;
  request.set_namespace_("neff");
  request.set_page_size(kPageSize);
  do {
    v1::ListEntriesResponse response;
    if (!admin
             ->ListEntries(ContextWithTimeout(kCallTimeout).get(), request,
                           &response)
             .ok()) {
      return false;
    }
    for (const v1::EntryInfo& info : response.entries()) {
      auto record = info.entry().metadata().find(kKeyInputsMetadata);
      if (record != info.entry().metadata().end()) {
        AddRecord(info.id().key(), record->second, out);
      }
    }
    request.set_page_token(response.next_page_token());
  } while (!request.page_token().empty());
  return true;
}

void FromStore(const CacheClientOptions& options, std::vector<CachedKey>& out) {
  StoreOptions store_options;
  store_options.root = options.neff_cache_dir;
  store_options.host_id = options.host;
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(store_options);
  if (!store.ok()) return;
  (void)(*store)->ForEachEntry([&](const EntryKey& id) {
    absl::StatusOr<std::string> json =
        ReadSmallFile((*store)->PathsOf(id).key_inputs(), kMaxRecordBytes);
    if (json.ok()) AddRecord(id.key(), *json, out);
    return true;
  });
}

}  // namespace

std::vector<CachedKey> CachedKeyInputs(const CacheClientOptions& options) {
  std::vector<CachedKey> out;
  if (!options.use_daemon || !FromDaemon(options, out)) {
    out.clear();
    FromStore(options, out);
  }
  return out;
}

}  // namespace neffd::neffcc
