// daemon/etcd/etcd_client.h
//
// EtcdClient speaks etcd's v3 gRPC API (proto/etcd/etcd_v3.proto) for the
// cluster coordination of issue 32: leases that live while their holder
// keeps them alive, keys that exist only under such a lease, and watches
// that wake a waiter when a key changes. No etcd C++ library is in Debian;
// this is the part of one neffd needs.
//
//   - Endpoints are "HOST:PORT[,HOST:PORT...]" (an etcd cluster's client
//     URLs without the scheme). IPv4 literals are balanced over gRPC's ipv4
//     resolver; a name goes through DNS. With TLS files, the channel is TLS
//     (mutual when a certificate and key are given), like the daemon's own
//     listener.
//   - Every call has a deadline (`call_timeout`, or the wait a Watch is
//     given): etcd unreachable or without quorum is an error after at most
//     that long, never a hang. Errors are absl statuses carrying gRPC's
//     code (UNAVAILABLE, DEADLINE_EXCEEDED, ...) and a message naming the
//     call and the endpoints.
//   - CreateIfAbsent is the compare-and-set a lease is built on: one Txn
//     that puts the key only if it has never been created (create_revision
//     == 0), else reads who has it.
//   - WaitForChange opens a watch from a given revision, so a change made
//     between a read and the watch is never missed.
//
// Thread-safe: calls may be made from any number of threads.
#ifndef NEFFD_DAEMON_ETCD_ETCD_CLIENT_H_
#define NEFFD_DAEMON_ETCD_ETCD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/etcd/etcd_v3.grpc.pb.h"

namespace neffd::etcd {

struct EtcdOptions {
  std::string endpoints;  // "127.0.0.1:2379,127.0.0.1:22379"
  absl::Duration call_timeout = absl::Seconds(2);
  // PEM files: `ca` alone for TLS, with `cert` and `key` for mutual TLS;
  // none for plaintext (loopback and tests).
  std::string ca;
  std::string cert;
  std::string key;
};

// A key as read: its value and the revisions a watcher or a compare needs.
struct KeyState {
  std::string value;
  int64_t create_revision = 0;
  int64_t mod_revision = 0;
  int64_t lease = 0;
};

struct CreateResult {
  bool created = false;
  // The store's revision after the Txn: watch from revision + 1 to see
  // what happens to the key next.
  int64_t revision = 0;
  // When not created: the key as it is (its holder's value).
  std::optional<KeyState> existing;
};

struct Change {
  enum Kind { kPut, kDelete };
  Kind kind = kPut;
  std::string key;
  std::string value;  // the new value of a put
  int64_t revision = 0;
};

// One watch stream on every key under a prefix (EtcdClient::WatchPrefix).
// Run blocks, calling `on_change` for each change in revision order, until
// Cancel() or the stream ends; Cancel may be called from any thread, before
// or during Run.
class PrefixWatch {
 public:
  using OnChange = std::function<void(const Change&)>;
  // `on_ready` runs once etcd has created the watch, with the revision
  // it watches from (every change after it will be delivered).
  // Returns why the stream ended: Cancelled after Cancel(), OutOfRange if
  // etcd compacted past the start (start again from 0), else gRPC's error.
  // `*next_revision` is where to resume without missing a change.
  virtual absl::Status Run(const std::function<void(int64_t)>& on_ready,
                           const OnChange& on_change,
                           int64_t* next_revision) = 0;
  virtual void Cancel() = 0;
  virtual ~PrefixWatch() = default;
};

class EtcdClient {
 public:
  // InvalidArgument naming the option for an empty endpoint list or an
  // unreadable TLS file. Connecting is lazy: an unreachable etcd shows up
  // at the first call.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(
      EtcdOptions options);

  // A lease of `ttl` (etcd rounds it up to its minimum); its id, and in
  // `*granted` (if given) the TTL etcd granted.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl,
                                     absl::Duration* granted = nullptr);
  // Renews `lease` once; NotFound if it has expired or was revoked.
  absl::Status KeepAlive(int64_t lease);
  // Ends `lease` now: every key put under it is deleted.
  absl::Status RevokeLease(int64_t lease);

  // Puts `key` = `value` under `lease` (0: none) if the key does not exist.
  absl::StatusOr<CreateResult> CreateIfAbsent(const std::string& key,
                                              const std::string& value,
                                              int64_t lease);
  // The key, or nullopt if it does not exist; `revision` (if given) is set
  // to the store's revision of the read.
  absl::StatusOr<std::optional<KeyState>> Get(const std::string& key,
                                              int64_t* revision = nullptr);
  absl::Status Put(const std::string& key, const std::string& value,
                   int64_t lease = 0);
  // Deletes `key`; true if it existed.
  absl::StatusOr<bool> Delete(const std::string& key);
  // Deletes `key` only if it is the incarnation created at
  // `create_revision` (a holder releasing what it created, never what
  // another created after it); true if it did.
  absl::StatusOr<bool> DeleteIfCreatedAt(const std::string& key,
                                         int64_t create_revision);
  // Every key under `prefix`, sorted, with its state.
  absl::StatusOr<std::vector<std::pair<std::string, KeyState>>> List(
      const std::string& prefix);

  // The first change to `key` at or after `from_revision` (a revision a
  // read returned, plus one), waiting at most `wait`: DeadlineExceeded if
  // none came.
  absl::StatusOr<Change> WaitForChange(const std::string& key,
                                       int64_t from_revision,
                                       absl::Duration wait);

  // A watch on every key under `prefix` from `from_revision` (0: from
  // now); `deletes_only` drops puts on etcd's side. No deadline: it lives
  // until cancelled or broken.
  std::unique_ptr<PrefixWatch> WatchPrefix(const std::string& prefix,
                                           int64_t from_revision,
                                           bool deletes_only);

  const std::string& endpoints() const { return options_.endpoints; }

 private:
  EtcdClient(EtcdOptions options, std::shared_ptr<grpc::Channel> channel);
  absl::Status Error(const grpc::Status& status, const char* call) const;

  const EtcdOptions options_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<etcdserverpb::KV::Stub> kv_;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease_;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch_;
};

}  // namespace neffd::etcd

#endif  // NEFFD_DAEMON_ETCD_ETCD_CLIENT_H_
