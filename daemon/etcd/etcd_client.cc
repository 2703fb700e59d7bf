#include "daemon/etcd/etcd_client.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/call_deadline.h"
#include "store/file_util.h"

namespace neffd::etcd {
namespace {

constexpr uint64_t kMaxPemBytes = 1 << 20;

bool IsIpv4Literal(absl::string_view host_port) {
  const absl::string_view host = host_port.substr(0, host_port.rfind(':'));
  if (host.empty()) return false;
  for (char c : host) {
    if (!absl::ascii_isdigit(c) && c != '.') return false;
  }
  return true;
}

// gRPC's target for the endpoint list: every IPv4 literal through the ipv4
// resolver (balanced round robin), else the first name through DNS.
std::string TargetFor(const std::vector<std::string>& endpoints) {
  for (const std::string& e : endpoints) {
    if (!IsIpv4Literal(e)) return absl::StrCat("dns:///", endpoints.front());
  }
  return absl::StrCat("ipv4:", absl::StrJoin(endpoints, ","));
}

absl::StatusOr<std::string> ReadPem(const std::string& path,
                                    const char* option) {
  if (path.empty()) return std::string();
  absl::StatusOr<std::string> pem = ReadSmallFile(path, kMaxPemBytes);
  if (!pem.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        option, ": cannot read ", path, ": ", pem.status().message()));
  }
  return pem;
}

// The end of the range of keys that start with `prefix`: etcd's
// "prefix + 1" (the last byte below 0xff incremented, the rest dropped).
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(end.back() + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

KeyState StateOf(const etcdserverpb::KeyValue& kv) {
  return KeyState{kv.value(), kv.create_revision(), kv.mod_revision(),
                  kv.lease()};
}

// Makes `txn` apply only while `key`'s current incarnation was created at
// `revision` (0: the key does not exist).
void RequireCreateRevision(etcdserverpb::TxnRequest& txn,
                           const std::string& key, int64_t revision) {
  etcdserverpb::Compare* compare = txn.add_compare();
  compare->set_key(key);
  compare->set_target(etcdserverpb::Compare::CREATE);
  compare->set_result(etcdserverpb::Compare::EQUAL);
  compare->set_create_revision(revision);
}

Change ChangeOf(const etcdserverpb::Event& event) {
  return Change{event.type() == etcdserverpb::Event::DELETE ? Change::kDelete
                                                            : Change::kPut,
                event.kv().key(), event.kv().value(),
                event.kv().mod_revision()};
}

class GrpcPrefixWatch : public PrefixWatch {
 public:
  GrpcPrefixWatch(etcdserverpb::Watch::Stub* stub, std::string endpoints,
                  std::string prefix, int64_t from_revision, bool deletes_only)
      : stub_(stub),
        endpoints_(std::move(endpoints)),
        prefix_(std::move(prefix)),
        from_revision_(from_revision),
        deletes_only_(deletes_only) {}

  absl::Status Run(const std::function<void(int64_t)>& on_ready,
                   const OnChange& on_change, int64_t* next_revision) override {
    *next_revision = from_revision_;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return absl::CancelledError("watch cancelled");
    }
    auto stream = stub_->Watch(&context_);
    etcdserverpb::WatchRequest request;
    etcdserverpb::WatchCreateRequest* create = request.mutable_create_request();
    create->set_key(prefix_);
    create->set_range_end(PrefixEnd(prefix_));
    create->set_start_revision(from_revision_);
    if (deletes_only_) {
      create->add_filters(etcdserverpb::WatchCreateRequest::NOPUT);
    }
    absl::Status ended;
    if (stream->Write(request)) {
      etcdserverpb::WatchResponse response;
      while (ended.ok() && stream->Read(&response)) {
        if (response.canceled()) {
          ended = absl::OutOfRangeError(absl::StrCat(
              "etcd at ", endpoints_, ": Watch ", prefix_,
              ": canceled by etcd (compacted to ", response.compact_revision(),
              "): ", response.cancel_reason()));
          *next_revision = 0;
          break;
        }
        if (response.created()) {
          // Every change after the header's revision is delivered (from
          // now), or after the one asked for.
          const int64_t from = from_revision_ > 0
                                   ? from_revision_
                                   : response.header().revision() + 1;
          *next_revision = from;
          on_ready(from - 1);
        }
        for (const etcdserverpb::Event& event : response.events()) {
          on_change(ChangeOf(event));
          *next_revision = event.kv().mod_revision() + 1;
        }
      }
    }
    context_.TryCancel();
    grpc::Status status = stream->Finish();
    if (!ended.ok()) return ended;
    {
      absl::MutexLock lock(&mu_);
      if (cancelled_) return absl::CancelledError("watch cancelled");
    }
    return absl::Status(
        static_cast<absl::StatusCode>(
            status.ok() ? grpc::StatusCode::UNAVAILABLE : status.error_code()),
        absl::StrCat("etcd at ", endpoints_, ": Watch ", prefix_, ": ",
                     status.ok() ? "stream ended" : status.error_message()));
  }

  void Cancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    context_.TryCancel();
  }

 private:
  etcdserverpb::Watch::Stub* const stub_;
  const std::string endpoints_;
  const std::string prefix_;
  const int64_t from_revision_;
  const bool deletes_only_;
  grpc::ClientContext context_;
  absl::Mutex mu_;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(
    EtcdOptions options) {
  std::vector<std::string> endpoints =
      absl::StrSplit(options.endpoints, ',', absl::SkipWhitespace());
  if (endpoints.empty()) {
    return absl::InvalidArgumentError("etcd endpoints: none given");
  }
  if (options.call_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("etcd call timeout: must be positive");
  }
  std::shared_ptr<grpc::ChannelCredentials> credentials =
      grpc::InsecureChannelCredentials();
  if (!options.ca.empty() || !options.cert.empty() || !options.key.empty()) {
    if (options.cert.empty() != options.key.empty()) {
      return absl::InvalidArgumentError(
          "etcd TLS: a certificate and its key go together");
    }
    grpc::SslCredentialsOptions ssl;
    absl::StatusOr<std::string> ca = ReadPem(options.ca, "etcd CA");
    absl::StatusOr<std::string> cert = ReadPem(options.cert, "etcd cert");
    absl::StatusOr<std::string> key = ReadPem(options.key, "etcd key");
    for (const auto* read : {&ca, &cert, &key}) {
      if (!read->ok()) return read->status();
    }
    ssl.pem_root_certs = *ca;
    ssl.pem_cert_chain = *cert;
    ssl.pem_private_key = *key;
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetLoadBalancingPolicyName("round_robin");
  // A call that finds its member gone is tried on another, within its
  // deadline: one member of three down is not etcd down. (A retried Txn
  // may have been applied; CreateIfAbsent's callers recognize their own
  // put.)
  args.SetServiceConfigJSON(R"json({"methodConfig": [{
      "name": [{"service": "etcdserverpb.KV"},
               {"service": "etcdserverpb.Lease"}],
      "retryPolicy": {"maxAttempts": 3, "initialBackoff": "0.05s",
                      "maxBackoff": "0.5s", "backoffMultiplier": 2,
                      "retryableStatusCodes": ["UNAVAILABLE"]}}]})json");
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateCustomChannel(TargetFor(endpoints), credentials, args);
  return std::unique_ptr<EtcdClient>(
      new EtcdClient(std::move(options), std::move(channel)));
}

EtcdClient::EtcdClient(EtcdOptions options,
                       std::shared_ptr<grpc::Channel> channel)
    : options_(std::move(options)),
      channel_(std::move(channel)),
      kv_(etcdserverpb::KV::NewStub(channel_)),
      lease_(etcdserverpb::Lease::NewStub(channel_)),
      watch_(etcdserverpb::Watch::NewStub(channel_)) {}

absl::Status EtcdClient::Error(const grpc::Status& status,
                               const char* call) const {
  // etcd (Go) ends a call whose deadline its own context saw pass first
  // with UNKNOWN "context deadline exceeded": the same deadline, not a
  // failure of etcd's.
  const bool deadline = status.error_code() == grpc::StatusCode::UNKNOWN &&
                        status.error_message() == "context deadline exceeded";
  return absl::Status(deadline
                          ? absl::StatusCode::kDeadlineExceeded
                          : static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat("etcd at ", options_.endpoints, ": ", call,
                                   ": ", status.error_message()));
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl,
                                               absl::Duration* granted) {
  etcdserverpb::LeaseGrantRequest request;
  request.set_ttl(std::max<int64_t>(
      1, absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)))));
  etcdserverpb::LeaseGrantResponse response;
  grpc::Status status = lease_->LeaseGrant(
      ContextWithTimeout(options_.call_timeout).get(), request, &response);
  if (!status.ok()) return Error(status, "LeaseGrant");
  if (!response.error().empty()) {
    return absl::UnavailableError(absl::StrCat(
        "etcd at ", options_.endpoints, ": LeaseGrant: ", response.error()));
  }
  if (granted != nullptr) *granted = absl::Seconds(response.ttl());
  return response.id();
}

absl::Status EtcdClient::KeepAlive(int64_t lease) {
  auto context = ContextWithTimeout(options_.call_timeout);
  auto stream = lease_->LeaseKeepAlive(context.get());
  etcdserverpb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseKeepAliveResponse response;
  const bool answered = stream->Write(request) && stream->Read(&response);
  stream->WritesDone();
  context->TryCancel();  // one renewal per stream: do not wait for its end
  grpc::Status status = stream->Finish();
  if (!answered) return Error(status, "LeaseKeepAlive");
  if (response.ttl() <= 0) {
    return absl::NotFoundError(absl::StrCat("etcd at ", options_.endpoints,
                                            ": lease ", lease, " has expired"));
  }
  return absl::OkStatus();
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  etcdserverpb::LeaseRevokeRequest request;
  request.set_id(lease);
  etcdserverpb::LeaseRevokeResponse response;
  grpc::Status status = lease_->LeaseRevoke(
      ContextWithTimeout(options_.call_timeout).get(), request, &response);
  return status.ok() ? absl::OkStatus() : Error(status, "LeaseRevoke");
}

absl::StatusOr<CreateResult> EtcdClient::CreateIfAbsent(
    const std::string& key, const std::string& value, int64_t lease) {
  etcdserverpb::TxnRequest request;
  RequireCreateRevision(request, key, 0);  // never created, or deleted since
  etcdserverpb::PutRequest* put = request.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  request.add_failure()->mutable_request_range()->set_key(key);
  etcdserverpb::TxnResponse response;
  grpc::Status status = kv_->Txn(
      ContextWithTimeout(options_.call_timeout).get(), request, &response);
  if (!status.ok()) return Error(status, "Txn");
  CreateResult result;
  result.created = response.succeeded();
  result.revision = response.header().revision();
  if (!result.created && response.responses_size() == 1 &&
      response.responses(0).response_range().kvs_size() == 1) {
    const etcdserverpb::KeyValue& kv =
        response.responses(0).response_range().kvs(0);
    result.existing = StateOf(kv);
  }
  return result;
}

absl::StatusOr<std::optional<KeyState>> EtcdClient::Get(const std::string& key,
                                                        int64_t* revision) {
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  etcdserverpb::RangeResponse response;
  grpc::Status status = kv_->Range(
      ContextWithTimeout(options_.call_timeout).get(), request, &response);
  if (!status.ok()) return Error(status, "Range");
  if (revision != nullptr) *revision = response.header().revision();
  if (response.kvs_size() == 0) return std::optional<KeyState>();
  const etcdserverpb::KeyValue& kv = response.kvs(0);
  return std::optional<KeyState>(StateOf(kv));
}

absl::Status EtcdClient::Put(const std::string& key, const std::string& value,
                             int64_t lease) {
  etcdserverpb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  etcdserverpb::PutResponse response;
  grpc::Status status = kv_->Put(
      ContextWithTimeout(options_.call_timeout).get(), request, &response);
  return status.ok() ? absl::OkStatus() : Error(status, "Put");
}

absl::StatusOr<bool> EtcdClient::Delete(const std::string& key) {
  etcdserverpb::DeleteRangeRequest request;
  request.set_key(key);
  etcdserverpb::DeleteRangeResponse response;
  grpc::Status status = kv_->DeleteRange(
      ContextWithTimeout(options_.call_timeout).get(), request, &response);
  if (!status.ok()) return Error(status, "DeleteRange");
  return response.deleted() > 0;
}

absl::StatusOr<bool> EtcdClient::DeleteIfCreatedAt(const std::string& key,
                                                   int64_t create_revision) {
  etcdserverpb::TxnRequest request;
  RequireCreateRevision(request, key, create_revision);
  request.add_success()->mutable_request_delete_range()->set_key(key);
  etcdserverpb::TxnResponse response;
  grpc::Status status = kv_->Txn(
      ContextWithTimeout(options_.call_timeout).get(), request, &response);
  if (!status.ok()) return Error(status, "Txn");
  return response.succeeded();
}

absl::StatusOr<std::vector<std::pair<std::string, KeyState>>> EtcdClient::List(
    const std::string& prefix) {
  etcdserverpb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  etcdserverpb::RangeResponse response;
  grpc::Status status = kv_->Range(
      ContextWithTimeout(options_.call_timeout).get(), request, &response);
  if (!status.ok()) return Error(status, "Range");
  std::vector<std::pair<std::string, KeyState>> keys;
  keys.reserve(response.kvs_size());
  for (const etcdserverpb::KeyValue& kv : response.kvs()) {
    keys.emplace_back(kv.key(), StateOf(kv));
  }
  return keys;
}

std::unique_ptr<PrefixWatch> EtcdClient::WatchPrefix(const std::string& prefix,
                                                     int64_t from_revision,
                                                     bool deletes_only) {
  return std::make_unique<GrpcPrefixWatch>(watch_.get(), options_.endpoints,
                                           prefix, from_revision, deletes_only);
}

absl::StatusOr<Change> EtcdClient::WaitForChange(const std::string& key,
                                                 int64_t from_revision,
                                                 absl::Duration wait) {
  auto context = ContextWithTimeout(wait);
  auto stream = watch_->Watch(context.get());
  etcdserverpb::WatchRequest request;
  etcdserverpb::WatchCreateRequest* create = request.mutable_create_request();
  create->set_key(key);
  create->set_start_revision(from_revision);
  std::optional<Change> change;
  bool canceled_by_etcd = false;
  if (stream->Write(request)) {
    etcdserverpb::WatchResponse response;
    while (!change.has_value() && stream->Read(&response)) {
      if (response.canceled()) {  // e.g. compacted past from_revision
        canceled_by_etcd = true;
        break;
      }
      if (response.events_size() > 0) {
        change = ChangeOf(response.events(0));
      }
    }
  }
  // The stream stays open on etcd's side until cancelled; a read that
  // ended by itself (the deadline, etcd gone) keeps its status.
  if (change.has_value() || canceled_by_etcd) context->TryCancel();
  grpc::Status status = stream->Finish();
  if (change.has_value()) return *change;
  if (canceled_by_etcd) {
    return absl::FailedPreconditionError(absl::StrCat(
        "etcd at ", options_.endpoints, ": Watch ", key, " from revision ",
        from_revision, ": canceled by etcd (compacted?); read it again"));
  }
  return Error(status, "Watch");
}

}  // namespace neffd::etcd
