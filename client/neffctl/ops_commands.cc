// neffctl's operations commands: ls, show, locks, drain, undrain, health,
// config.
#include <algorithm>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/neffctl/ctl.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace neffd::ctl {
namespace {

std::string HolderText(const v1::Holder& h) {
  return absl::StrCat(h.host(), " pid ", h.pid(),
                      h.rank() >= 0 ? absl::StrCat(" rank ", h.rank()) : "");
}

}  // namespace

int Ctl::List(const v1::ListEntriesRequest& request) {
  // Index-order listings come in pages, printed as they arrive, so a
  // million entries need neither one huge message nor one huge table.
  const bool paged = !request.failed() && !request.locked() &&
                     request.sort_by() == v1::ListEntriesRequest::KEY;
  v1::ListEntriesRequest page_request = request;
  if (paged) page_request.set_page_size(kListPageSize);
  v1::ListEntriesResponse all;
  uint64_t shown = 0;
  for (bool first = true;; first = false) {
    v1::ListEntriesResponse response;
    grpc::Status status = admin_->ListEntries(Context(absl::Minutes(5)).get(),
                                              page_request, &response);
    if (!status.ok()) return RpcFailure(status, address_);
    all.set_total(response.total());
    if (json_) {
      for (v1::EntryInfo& e : *response.mutable_entries()) {
        *all.add_entries() = std::move(e);
      }
    } else {
      PrintEntries(request, response, first);
    }
    shown += response.entries_size();
    if (!paged || response.next_page_token().empty() ||
        (request.limit() > 0 && shown >= request.limit())) {
      break;
    }
    page_request.set_page_token(response.next_page_token());
    if (request.limit() > 0) {
      page_request.set_limit(request.limit() - static_cast<uint32_t>(shown));
    }
  }
  if (json_) {
    PrintJson(all);
    return kOk;
  }
  std::printf("%llu of %llu %s\n", static_cast<unsigned long long>(shown),
              static_cast<unsigned long long>(all.total()),
              request.failed() ? "recorded failures" : "entries");
  return kOk;
}

void Ctl::PrintEntries(const v1::ListEntriesRequest& request,
                       const v1::ListEntriesResponse& response, bool header) {
  std::vector<std::vector<std::string>> rows;
  if (request.failed()) {
    if (header) {
      rows.push_back({"NAMESPACE", "COMPILER", "KEY", "RETRY AFTER", "LOG"});
    }
    for (const v1::EntryInfo& e : response.entries()) {
      std::string log = e.failure().log().substr(0, 60);
      std::replace(log.begin(), log.end(), '\n', ' ');
      rows.push_back({e.id().namespace_(), e.id().compiler_version(),
                      e.id().key(), RetryAfter(e.failure()), log});
    }
  } else {
    if (header) {
      rows.push_back(
          {"NAMESPACE", "COMPILER", "KEY", "SIZE", "LAST ACCESS", "LOCKED"});
    }
    for (const v1::EntryInfo& e : response.entries()) {
      rows.push_back({e.id().namespace_(), e.id().compiler_version(),
                      e.id().key(), HumanBytes(e.entry().size()),
                      Ago(e.last_access_unix_ms()),
                      e.locked() ? HolderText(e.lease().holder()) : "-"});
    }
  }
  PrintTable(rows, {3});
}

int Ctl::Show(const EntryKey& id) {
  v1::ShowEntryRequest request;
  *request.mutable_id() = id.ToProto();
  v1::EntryInfo info;
  grpc::Status status =
      admin_->ShowEntry(Context(absl::Minutes(1)).get(), request, &info);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    if (json_) {
      PrintJson(info);
    } else {
      std::printf("no entry %s\n", id.Canonical().c_str());
    }
    return kMiss;
  }
  if (!status.ok()) return RpcFailure(status, address_);
  if (json_) {
    PrintJson(info);
    return kOk;
  }
  const v1::Entry& e = info.entry();
  std::vector<std::vector<std::string>> rows = {
      {"entry", IdText(info.id())},
      {"state", info.cached()        ? "cached"
                : info.has_failure() ? "recorded compile failure"
                                     : "being compiled"}};
  if (info.cached()) {
    rows.push_back({"path", e.path()});
    rows.push_back({"size", absl::StrCat(HumanBytes(e.size()), " (", e.size(),
                                         " bytes)")});
    rows.push_back({"sha256", e.sha256()});
    rows.push_back(
        {"published",
         absl::StrCat(
             Ago(e.publish_time_unix_ms()), " by ", e.producer_host(),
             e.producer_pid() ? absl::StrCat(" pid ", e.producer_pid()) : "")});
    rows.push_back({"last access", Ago(info.last_access_unix_ms())});
    for (const auto& [key, value] : e.metadata()) {
      rows.push_back({"metadata " + key, value});
    }
  }
  if (info.has_failure()) {
    rows.push_back({"retry after", RetryAfter(info.failure())});
  }
  if (info.locked()) {
    const v1::LeaseInfo& l = info.lease();
    rows.push_back(
        {"lease", absl::StrCat(HolderText(l.holder()), ", held ",
                               HumanDuration(absl::Milliseconds(l.age_ms())),
                               ", ", l.waiters(), " waiting")});
  }
  PrintTable(rows);
  if (info.has_failure()) std::printf("%s\n", info.failure().log().c_str());
  return kOk;
}

int Ctl::Locks() {
  v1::LocksResponse response;
  grpc::Status status = admin_->GetLocks(Context(absl::Seconds(10)).get(),
                                         v1::GetLocksRequest(), &response);
  if (!status.ok()) return RpcFailure(status, address_);
  if (json_) {
    PrintJson(response);
    return kOk;
  }
  std::vector<std::vector<std::string>> rows = {
      {"KEY", "HOLDER", "AGE", "EXPIRES IN", "WAITERS", "STATE"}};
  for (const v1::LeaseInfo& l : response.leases()) {
    rows.push_back({IdText(l.id()), HolderText(l.holder()),
                    HumanDuration(absl::Milliseconds(l.age_ms())),
                    HumanDuration(absl::Milliseconds(l.expires_in_ms())),
                    absl::StrCat(l.waiters()),
                    l.publishing() ? "publishing" : "compiling"});
  }
  PrintTable(rows, {2, 3, 4});
  std::printf("%d leases held, %llu waiters%s\n", response.leases_size(),
              static_cast<unsigned long long>(response.waiters()),
              response.draining() ? "; DRAINING (no new leases)" : "");
  // Flocks on this host's lock directory held without a lease: unmodified
  // TorchNeuron ranks compiling (or clients in fallback mode).
  if (response.file_locks_size() > 0) {
    std::vector<std::vector<std::string>> flocks = {{"KEY", "PID", "FILE"}};
    for (const v1::FileLockInfo& f : response.file_locks()) {
      flocks.push_back({f.key(), absl::StrCat(f.pid()), f.path()});
    }
    PrintTable(flocks, {1});
    std::printf("%d lock files held by processes without a lease\n",
                response.file_locks_size());
  }
  // Every host's holds, from etcd (--coordinator).
  if (!response.cluster_holders_error().empty()) {
    std::printf("cluster holders: etcd did not answer: %s\n",
                response.cluster_holders_error().c_str());
  } else if (response.cluster_holders_size() > 0) {
    std::vector<std::vector<std::string>> cluster = {
        {"KEY", "HOST", "PID", "ETCD LEASE"}};
    for (const v1::ClusterHolderInfo& h : response.cluster_holders()) {
      cluster.push_back({h.key(), h.host(), absl::StrCat(h.pid()),
                         absl::StrCat(absl::Hex(h.etcd_lease()))});
    }
    PrintTable(cluster, {2});
    std::printf("%d keys held across hosts (etcd)\n",
                response.cluster_holders_size());
  }
  return kOk;
}

int Ctl::Drain(bool drain) {
  v1::DrainResponse response;
  auto context = Context(absl::Seconds(10));
  grpc::Status status =
      drain ? operator_->Drain(context.get(), v1::DrainRequest(), &response)
            : operator_->Undrain(context.get(), v1::DrainRequest(), &response);
  if (!status.ok()) return RpcFailure(status, admin_address_);
  if (json_) {
    PrintJson(response);
  } else if (response.draining()) {
    std::printf(
        "draining: no new leases; %llu leases still out may finish; health "
        "is NOT_SERVING until `neffctl undrain`\n",
        static_cast<unsigned long long>(response.leases_held()));
  } else {
    std::printf("serving: leases are granted again\n");
  }
  return kOk;
}

int Ctl::Health(const std::string& service) {
  auto stub = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  grpc::health::v1::HealthCheckResponse response;
  grpc::Status status =
      stub->Check(Context(absl::Seconds(10)).get(), request, &response);
  if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
    return Complain(kBadInput, status.error_message());
  }
  if (!status.ok()) return RpcFailure(status, address_);
  const bool serving =
      response.status() == grpc::health::v1::HealthCheckResponse::SERVING;
  if (json_) {
    PrintJson(response);
  } else {
    std::printf("%s\n",
                grpc::health::v1::HealthCheckResponse::ServingStatus_Name(
                    response.status())
                    .c_str());
  }
  return serving ? kOk : kMiss;
}

int Ctl::Config() {
  v1::ConfigResponse response;
  grpc::Status status = admin_->GetConfig(Context(absl::Seconds(10)).get(),
                                          v1::GetConfigRequest(), &response);
  if (!status.ok()) return RpcFailure(status, address_);
  if (json_) {
    PrintJson(response);
    return kOk;
  }
  for (const auto* group : {&response.settings(), &response.variables()}) {
    std::vector<std::vector<std::string>> rows = {
        {group == &response.settings() ? "SETTING" : "VARIABLE", "VALUE",
         "ORIGIN", "NOTE"}};
    for (const v1::ConfigValue& v : *group) {
      rows.push_back({v.name(), v.value(), v.origin(), v.note()});
    }
    PrintTable(rows);
    std::printf("\n");
  }
  for (const std::string& w : response.warnings()) {
    std::printf("warning: %s\n", w.c_str());
  }
  return kOk;
}

}  // namespace neffd::ctl
