// client/neffctl/ctl.h
//
// The pieces every neffctl command shares: exit codes, one-line complaints,
// mapping RPC failures to exit codes, JSON output through protobuf's
// json_util, units for people, and a progress bar that shows only on a
// terminal. Commands are methods of Ctl, one file per group.
#ifndef NEFFD_CLIENT_NEFFCTL_CTL_H_
#define NEFFD_CLIENT_NEFFCTL_CTL_H_

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "google/protobuf/message.h"
#include "google/protobuf/struct.pb.h"
#include "grpcpp/grpcpp.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "store/entry_id.h"

namespace neffd::ctl {

inline constexpr int kOk = 0;
inline constexpr int kMiss = 1;
inline constexpr int kBadInput = 2;
inline constexpr int kUnreachable = 3;
inline constexpr int kFailed = 4;

// Prints "neffctl: {message}" on stderr and returns `code`.
int Complain(int code, absl::string_view message);
int RpcFailure(const grpc::Status& status, const std::string& address);

void PrintJson(const google::protobuf::Message& message);
using Field = std::pair<const char*, google::protobuf::Value>;
void PrintFields(std::initializer_list<Field> fields);
google::protobuf::Value Str(const std::string& s);
google::protobuf::Value Num(double n);

// "neff/2.19.1/KEY".
std::string IdText(const v1::EntryId& id);
// "1.5 GiB", "312 B".
std::string HumanBytes(uint64_t bytes);
// "850ms", "42s", "3m12s", "5h03m", "2d04h".
std::string HumanDuration(absl::Duration d);
// When a recorded failure may be retried, as a UTC date and time.
std::string RetryAfter(const v1::Failure& failure);
// "3m ago", or "never" for 0.
std::string Ago(int64_t unix_ms);

// Prints rows as columns two spaces apart, each as wide as its widest cell;
// the first row is the header. Columns named in `right` are right-aligned.
void PrintTable(const std::vector<std::vector<std::string>>& rows,
                const std::vector<size_t>& right = {});

// A one-line progress bar on stderr, drawn only when stderr is a terminal.
class Progress {
 public:
  explicit Progress(std::string label);
  ~Progress();
  void Update(uint64_t done, uint64_t total, const std::string& detail);

 private:
  const std::string label_;
  const bool tty_;
  bool drawn_ = false;
};

class Ctl {
 public:
  // `address` is the ranks' socket (every read-only call); `admin_address`
  // the admin socket, where the calls that change the cache go (evict, gc,
  // import, warm, drain, undrain, stats -z). Empty: the environment or default.
  // `credentials` are for a TCP address (client/daemon_channel.h).
  Ctl(std::string address, std::string admin_address,
      std::shared_ptr<grpc::ChannelCredentials> credentials, bool json);

  // Data commands (entry_commands.cc).
  int Lookup(const EntryKey& id);
  int Put(const EntryKey& id, const std::string& file);
  int Get(const EntryKey& id, const std::string& out);

  // Operator commands (admin_commands.cc).
  int Stats();
  // With `failure_only` (neffctl forget) only a recorded failure goes.
  int Evict(const EntryKey& id, bool failure_only = false);
  int Verify(const std::string& ns, bool all);
  int Gc(const std::string& ns, uint64_t max_size, absl::Duration older_than,
         bool dry_run);
  // The daemon's store (indexed by the daemon), else a libneuronxla cache
  // (client/neffcc/import.h), filed by this process under neffcc's keys.
  int Import(const std::string& dir, bool clear_stale_locks);
  // The S3 tier (remote_commands.cc).
  int Warm(const std::string& manifest);
  int Manifest(absl::Duration since);
  int ResetStats();

  // Operations (ops_commands.cc).
  int List(const v1::ListEntriesRequest& request);
  int Show(const EntryKey& id);
  int Locks();
  int Drain(bool drain);
  int Health(const std::string& service);
  int Config();
  // The job's environment checked as support would (doctor_commands.cc).
  int Doctor();

  // Key-input reports (why_commands.cc): why KEY got its own key, and which
  // inputs are cached under several keys. `compiler_version` may be empty.
  int Why(const std::string& ns, const std::string& key,
          const std::string& compiler_version);
  int Drift(const std::string& ns, const std::string& compiler_version);

 private:
  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) const;
  int PublishStaged(const EntryKey& id, const v1::Lease& lease,
                    const std::string& file, uint64_t size,
                    const std::string& sha256, v1::PublishResponse* published);
  void Abandon(const EntryKey& id, const std::string& lease_id);
  int ImportLibneuronxla(const std::string& dir);
  // One page of `ls` as a table; `header` on the first.
  void PrintEntries(const v1::ListEntriesRequest& request,
                    const v1::ListEntriesResponse& response, bool header);

  // Every entry of this host's index matching `filter`, page by page.
  int ForEachListed(const v1::ListEntriesRequest& filter,
                    const std::function<void(const v1::EntryInfo&)>& each);

  // Rows per ListEntries page: about 2 MB on the wire.
  static constexpr uint32_t kListPageSize = 10000;

  const std::string address_;
  const std::string admin_address_;
  const bool json_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::CompileCache::Stub> cache_;
  std::unique_ptr<v1::CacheAdmin::Stub> admin_;
  // CacheAdmin on the admin socket: the mutating calls.
  std::unique_ptr<v1::CacheAdmin::Stub> operator_;
};

// The human form of Stats, ccache -s style (admin_commands.cc).
void PrintStats(const v1::Stats& stats, const std::string& address);

}  // namespace neffd::ctl

#endif  // NEFFD_CLIENT_NEFFCTL_CTL_H_
