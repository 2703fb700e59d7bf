// neffctl: the operator and scripting CLI for neffd.
//
//   neffctl [--address A] [--json] lookup NS KEY --compiler_version V
//   neffctl [--address A] [--json] put NS KEY FILE --compiler_version V
//   neffctl [--address A] [--json] get NS KEY OUT --compiler_version V
//   neffctl [--address A] [--json] stats
//
// Exit codes: 0 success or hit, 1 miss (or a recorded failure / lock
// timeout), 2 bad input or usage (one line on stderr), 3 daemon unreachable,
// 4 the daemon failed the operation.
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "client/daemon_channel.h"
#include "daemon/store/digest.h"
#include "daemon/store/entry_id.h"
#include "daemon/store/file_util.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "grpcpp/grpcpp.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"

ABSL_FLAG(std::string, address, "",
          "daemon address (default $NEFFD_ADDRESS, else "
          "unix:/run/neffd/neffd.sock)");
ABSL_FLAG(bool, json, false, "print JSON instead of text");
ABSL_FLAG(std::string, compiler_version, "",
          "neuronx-cc version of the entry (lookup, put, get)");

namespace neffd {
namespace {

constexpr int kOk = 0;
constexpr int kMiss = 1;
constexpr int kBadInput = 2;
constexpr int kUnreachable = 3;
constexpr int kFailed = 4;

constexpr char kUsage[] =
    "usage: neffctl [--address A] [--json] "
    "{lookup NS KEY | put NS KEY FILE | get NS KEY OUT | stats} "
    "[--compiler_version V]";

int Complain(int code, absl::string_view message) {
  std::fprintf(stderr, "neffctl: %s\n", std::string(message).c_str());
  return code;
}

int RpcFailure(const grpc::Status& status, const std::string& address) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Complain(kUnreachable,
                      absl::StrCat("cannot reach neffd at ", address, ": ",
                                   status.error_message()));
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::FAILED_PRECONDITION:
    case grpc::StatusCode::OUT_OF_RANGE:
      return Complain(kBadInput, status.error_message());
    default:
      return Complain(kFailed, status.error_message());
  }
}

void PrintJson(const google::protobuf::Message& message) {
  std::string json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  (void)google::protobuf::util::MessageToJsonString(message, &json, options);
  std::printf("%s\n", json.c_str());
}

void PrintFields(
    std::initializer_list<std::pair<const char*, google::protobuf::Value>>
        fields) {
  google::protobuf::Struct out;
  for (const auto& [name, value] : fields)
    (*out.mutable_fields())[name] = value;
  PrintJson(out);
}

google::protobuf::Value Str(const std::string& s) {
  google::protobuf::Value v;
  v.set_string_value(s);
  return v;
}

google::protobuf::Value Num(double n) {
  google::protobuf::Value v;
  v.set_number_value(n);
  return v;
}

std::string RetryAfter(const v1::Failure& failure) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                          absl::FromUnixMillis(failure.retry_after_unix_ms()),
                          absl::UTCTimeZone());
}

void PrintFailure(const v1::Failure& failure) {
  std::printf("FAILED (recorded compile failure; retry after %s)\n%s\n",
              RetryAfter(failure).c_str(), failure.log().c_str());
}

class Ctl {
 public:
  explicit Ctl(std::string address)
      : address_(ResolveDaemonAddress(address)),
        stub_(v1::CompileCache::NewStub(ConnectToDaemon(address_))),
        json_(absl::GetFlag(FLAGS_json)) {}

  int Lookup(const EntryKey& id);
  int Put(const EntryKey& id, const std::string& file);
  int Get(const EntryKey& id, const std::string& out);
  int Stats();

 private:
  std::unique_ptr<grpc::ClientContext> Context(absl::Duration timeout) {
    auto context = std::make_unique<grpc::ClientContext>();
    context->set_deadline(std::chrono::system_clock::now() +
                          absl::ToChronoMilliseconds(timeout));
    return context;
  }
  // Copies `file` into the lease's staging dir and publishes it.
  int PublishStaged(const EntryKey& id, const v1::Lease& lease,
                    const std::string& file, const CopyResult& content,
                    v1::PublishResponse* published);
  void Abandon(const EntryKey& id, const std::string& lease_id);

  const std::string address_;
  std::unique_ptr<v1::CompileCache::Stub> stub_;
  const bool json_;
};

int Ctl::Lookup(const EntryKey& id) {
  v1::LookupRequest request;
  *request.mutable_id() = id.ToProto();
  v1::LookupResponse response;
  grpc::Status status =
      stub_->Lookup(Context(absl::Seconds(60)).get(), request, &response);
  if (!status.ok()) return RpcFailure(status, address_);
  const v1::Entry& e = response.entry();
  const char* result =
      v1::LookupResponse::Result_Name(response.result()).c_str();
  if (json_) {
    if (response.result() == v1::LookupResponse::HIT) {
      PrintFields({{"result", Str(result)},
                   {"path", Str(e.path())},
                   {"size", Num(e.size())},
                   {"sha256", Str(e.sha256())}});
    } else if (response.result() == v1::LookupResponse::FAILED) {
      PrintFields({{"result", Str(result)},
                   {"log", Str(response.failure().log())},
                   {"retry_after_unix_ms",
                    Num(response.failure().retry_after_unix_ms())}});
    } else {
      PrintFields({{"result", Str(result)}});
    }
  } else if (response.result() == v1::LookupResponse::HIT) {
    std::printf("HIT %s (%llu bytes, sha256 %s)\n", e.path().c_str(),
                static_cast<unsigned long long>(e.size()), e.sha256().c_str());
  } else if (response.result() == v1::LookupResponse::FAILED) {
    PrintFailure(response.failure());
  } else {
    std::printf("MISS\n");
  }
  return response.result() == v1::LookupResponse::HIT ? kOk : kMiss;
}

void Ctl::Abandon(const EntryKey& id, const std::string& lease_id) {
  v1::UnlockRequest unlock;
  unlock.set_lease_id(lease_id);
  *unlock.mutable_id() = id.ToProto();
  unlock.set_outcome(v1::UnlockRequest::ABANDONED);
  v1::UnlockResponse ignored;
  (void)stub_->Unlock(Context(absl::Seconds(10)).get(), unlock, &ignored);
}

int Ctl::PublishStaged(const EntryKey& id, const v1::Lease& lease,
                       const std::string& file, const CopyResult& content,
                       v1::PublishResponse* published) {
  v1::PublishRequest request;
  request.set_lease_id(lease.lease_id());
  *request.mutable_id() = id.ToProto();
  request.set_size(content.size);
  request.set_sha256(content.sha256);
  UniqueFd in(open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid())
    return Complain(kBadInput, ErrnoStatus(errno, file).message());
  std::string staged;
  if (id.ns() == Namespace::kHlo && content.size <= (16u << 20)) {
    absl::StatusOr<std::string> bytes = ReadSmallFile(file, 16u << 20);
    if (!bytes.ok()) return Complain(kBadInput, bytes.status().message());
    request.set_inline_bytes(*std::move(bytes));
  } else {
    staged = absl::StrCat(lease.staging_dir(), "/",
                          UniqueTempName(id.key(), "neffctl").substr(1));
    UniqueFd out(
        open(staged.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!out.valid()) {
      return Complain(kFailed,
                      ErrnoStatus(errno, "staging " + staged).message());
    }
    absl::StatusOr<CopyResult> copied = CopyAndHash(in.get(), out.get(), file);
    if (!copied.ok() || copied->sha256 != content.sha256) {
      unlink(staged.c_str());
      return Complain(kFailed, absl::StrCat(file, " changed while staging it"));
    }
    request.set_staged_path(staged);
  }
  grpc::Status status =
      stub_->Publish(Context(absl::Hours(1)).get(), request, published);
  if (!status.ok()) {
    if (!staged.empty()) unlink(staged.c_str());
    return RpcFailure(status, address_);
  }
  return kOk;
}

int Ctl::Put(const EntryKey& id, const std::string& file) {
  UniqueFd in(open(file.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid())
    return Complain(kBadInput, ErrnoStatus(errno, file).message());
  absl::StatusOr<CopyResult> content = CopyAndHash(in.get(), -1, file);
  if (!content.ok()) return Complain(kBadInput, content.status().message());

  v1::LockRequest lock;
  *lock.mutable_id() = id.ToProto();
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  lock.mutable_holder()->set_host(host);
  lock.mutable_holder()->set_pid(getpid());
  lock.mutable_holder()->set_rank(-1);
  lock.set_wait(true);
  v1::LockResponse locked;
  grpc::ClientContext lock_context;  // the daemon bounds the wait
  grpc::Status status = stub_->Lock(&lock_context, lock, &locked);
  if (!status.ok()) return RpcFailure(status, address_);

  std::string outcome;
  v1::Entry entry;
  switch (locked.outcome()) {
    case v1::LockResponse::GRANTED: {
      v1::PublishResponse published;
      int rc = PublishStaged(id, locked.lease(), file, *content, &published);
      if (rc != kOk) {
        Abandon(id, locked.lease().lease_id());
        return rc;
      }
      outcome = v1::PublishResponse::Outcome_Name(published.outcome());
      entry = published.entry();
      break;
    }
    case v1::LockResponse::READY:
      outcome = "ALREADY_CACHED";
      entry = locked.entry();
      break;
    case v1::LockResponse::FAILED:
      if (!json_) PrintFailure(locked.failure());
      return kMiss;
    default:
      return Complain(
          kMiss, absl::StrCat("lock ",
                              v1::LockResponse::Outcome_Name(locked.outcome()),
                              "; nothing published"));
  }
  if (json_) {
    PrintFields({{"outcome", Str(outcome)},
                 {"path", Str(entry.path())},
                 {"sha256", Str(entry.sha256())}});
  } else {
    std::printf("%s %s (sha256 %s)\n", outcome.c_str(), entry.path().c_str(),
                entry.sha256().c_str());
  }
  return kOk;
}

int Ctl::Get(const EntryKey& id, const std::string& out_path) {
  v1::LookupRequest request;
  *request.mutable_id() = id.ToProto();
  v1::LookupResponse response;
  grpc::Status status =
      stub_->Lookup(Context(absl::Seconds(60)).get(), request, &response);
  if (!status.ok()) return RpcFailure(status, address_);
  if (response.result() != v1::LookupResponse::HIT) {
    if (json_) {
      PrintFields({{"result",
                    Str(v1::LookupResponse::Result_Name(response.result()))}});
    } else {
      std::printf("%s\n",
                  v1::LookupResponse::Result_Name(response.result()).c_str());
    }
    return kMiss;
  }
  const v1::Entry& e = response.entry();
  UniqueFd in(open(e.path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid())
    return Complain(kFailed, ErrnoStatus(errno, e.path()).message());
  // Write beside the destination, then rename: OUT is whole or untouched.
  std::string tmp = absl::StrCat(out_path, ".neffctl-tmp");
  UniqueFd out(
      open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out.valid())
    return Complain(kBadInput, ErrnoStatus(errno, out_path).message());
  absl::StatusOr<CopyResult> copied =
      CopyAndHash(in.get(), out.get(), e.path());
  if (!copied.ok() || copied->sha256 != e.sha256()) {
    unlink(tmp.c_str());
    return Complain(kFailed, absl::StrCat(e.path(),
                                          " did not match its sha256; not "
                                          "written"));
  }
  if (rename(tmp.c_str(), out_path.c_str()) != 0) {
    unlink(tmp.c_str());
    return Complain(kBadInput, ErrnoStatus(errno, out_path).message());
  }
  if (json_) {
    PrintFields({{"result", Str("HIT")},
                 {"path", Str(out_path)},
                 {"size", Num(e.size())},
                 {"sha256", Str(e.sha256())}});
  } else {
    std::printf("wrote %s (%llu bytes)\n", out_path.c_str(),
                static_cast<unsigned long long>(e.size()));
  }
  return kOk;
}

int Ctl::Stats() {
  v1::Stats stats;
  grpc::Status status = stub_->GetStats(Context(absl::Seconds(10)).get(),
                                        v1::GetStatsRequest(), &stats);
  if (!status.ok()) return RpcFailure(status, address_);
  if (json_) {
    PrintJson(stats);
    return kOk;
  }
  const double hit_rate =
      stats.lookups() ? 100.0 * stats.hits() / stats.lookups() : 0.0;
  std::printf(
      "lookups           %llu\n"
      "hits              %llu (%.1f%%)\n"
      "misses            %llu\n"
      "publishes         %llu\n"
      "already cached    %llu\n"
      "lock grants       %llu\n"
      "lock waits        %llu\n"
      "leases held       %llu\n"
      "entries           %llu\n"
      "bytes             %llu\n",
      (unsigned long long)stats.lookups(), (unsigned long long)stats.hits(),
      hit_rate, (unsigned long long)stats.misses(),
      (unsigned long long)stats.publishes(),
      (unsigned long long)stats.already_cached(),
      (unsigned long long)stats.lock_grants(),
      (unsigned long long)stats.lock_waits(),
      (unsigned long long)stats.leases_held(),
      (unsigned long long)stats.entries(), (unsigned long long)stats.bytes());
  return kOk;
}

int Main(int argc, char** argv) {
  absl::SetProgramUsageMessage(kUsage);
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() < 2) return Complain(kBadInput, kUsage);
  const std::string command = args[1];
  const size_t positional = args.size() - 2;
  Ctl ctl(absl::GetFlag(FLAGS_address));
  if (command == "stats") {
    if (positional != 0) return Complain(kBadInput, "stats takes no arguments");
    return ctl.Stats();
  }
  const size_t want = command == "lookup" ? 2 : 3;
  if (command != "lookup" && command != "put" && command != "get") {
    return Complain(kBadInput,
                    absl::StrCat("unknown command '", command, "'; ", kUsage));
  }
  if (positional != want) {
    return Complain(kBadInput, absl::StrCat(command, " takes ", want,
                                            " arguments; ", kUsage));
  }
  if (absl::GetFlag(FLAGS_compiler_version).empty()) {
    return Complain(kBadInput,
                    absl::StrCat(command, " needs --compiler_version"));
  }
  absl::StatusOr<EntryKey> id =
      EntryKey::Parse(args[2], absl::GetFlag(FLAGS_compiler_version), args[3]);
  if (!id.ok()) return Complain(kBadInput, id.status().message());
  if (command == "lookup") return ctl.Lookup(*id);
  if (command == "put") return ctl.Put(*id, args[4]);
  return ctl.Get(*id, args[4]);
}

}  // namespace
}  // namespace neffd

int main(int argc, char** argv) { return neffd::Main(argc, argv); }
