#include "client/neffctl/ctl.h"

#include <errno.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "client/daemon_channel.h"
#include "google/protobuf/util/json_util.h"
#include "store/env.h"

namespace neffd::ctl {

int Complain(int code, absl::string_view message) {
  std::fprintf(stderr, "neffctl: %s\n", std::string(message).c_str());
  return code;
}

namespace {

// Why a unix socket cannot be used, when it is its permissions: gRPC says
// only "failed to connect".
std::string SocketPermissionHint(const std::string& address) {
  if (!absl::StartsWith(address, "unix:")) return "";
  const std::string path = address.substr(5);
  if (access(path.c_str(), W_OK) == 0 || errno != EACCES) return "";
  return " (permission denied on the socket: it admits its owner and group "
         "only)";
}

}  // namespace

int RpcFailure(const grpc::Status& status, const std::string& address) {
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Complain(kUnreachable,
                      absl::StrCat("cannot reach neffd at ", address,
                                   SocketPermissionHint(address), ": ",
                                   status.error_message()));
    case grpc::StatusCode::PERMISSION_DENIED:
      return Complain(kFailed, absl::StrCat(status.error_message(),
                                            "; neffctl sent it to ", address));
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

void PrintFields(std::initializer_list<Field> fields) {
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

std::string IdText(const v1::EntryId& id) {
  return absl::StrCat(id.namespace_(), "/", id.compiler_version(), "/",
                      id.key());
}

std::string HumanBytes(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = bytes;
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  return unit == 0 ? absl::StrCat(bytes, " B")
                   : absl::StrFormat("%.1f %s", value, kUnits[unit]);
}

std::string HumanDuration(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  const int64_t s = absl::ToInt64Seconds(d);
  if (s < 1) return absl::StrCat(absl::ToInt64Milliseconds(d), "ms");
  if (s < 60) {
    return absl::StrFormat("%.1fs", absl::ToDoubleSeconds(d));
  }
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
}

std::string RetryAfter(const v1::Failure& failure) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                          absl::FromUnixMillis(failure.retry_after_unix_ms()),
                          absl::UTCTimeZone());
}

std::string Ago(int64_t unix_ms) {
  if (unix_ms <= 0) return "never";
  return HumanDuration(Env::Default()->Now() - absl::FromUnixMillis(unix_ms)) +
         " ago";
}

namespace {

// Columns line up on a terminal: count characters, not UTF-8 bytes ("…").
size_t DisplayWidth(const std::string& cell) {
  return std::count_if(cell.begin(), cell.end(),
                       [](char c) { return (c & 0xC0) != 0x80; });
}

}  // namespace

void PrintTable(const std::vector<std::vector<std::string>>& rows,
                const std::vector<size_t>& right) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) {
      width[i] = std::max(width[i], DisplayWidth(row[i]));
    }
  }
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const bool last = i + 1 == row.size();
      const std::string pad(width[i] - DisplayWidth(row[i]), ' ');
      const bool r = std::find(right.begin(), right.end(), i) != right.end();
      absl::StrAppend(&line, r ? pad : "", row[i], r || last ? "" : pad,
                      last ? "" : "  ");
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    std::printf("%s\n", line.c_str());
  }
}

Progress::Progress(std::string label)
    : label_(std::move(label)), tty_(isatty(STDERR_FILENO) == 1) {}

Progress::~Progress() {
  if (drawn_) std::fprintf(stderr, "\n");
}

void Progress::Update(uint64_t done, uint64_t total,
                      const std::string& detail) {
  if (!tty_) return;
  constexpr int kWidth = 30;
  const int filled =
      total == 0 ? kWidth : static_cast<int>(kWidth * done / total);
  std::fprintf(stderr, "\r%s [%s%s] %llu/%llu %s", label_.c_str(),
               std::string(filled, '=').c_str(),
               std::string(kWidth - filled, ' ').c_str(),
               static_cast<unsigned long long>(done),
               static_cast<unsigned long long>(total), detail.c_str());
  drawn_ = true;
}

Ctl::Ctl(std::string address, std::string admin_address,
         std::shared_ptr<grpc::ChannelCredentials> credentials, bool json)
    : address_(ResolveDaemonAddress(address)),
      admin_address_(ResolveAdminAddress(admin_address)),
      json_(json),
      channel_(ConnectToDaemon(address_, credentials)),
      cache_(v1::CompileCache::NewStub(channel_)),
      admin_(v1::CacheAdmin::NewStub(channel_)),
      operator_(v1::CacheAdmin::NewStub(
          ConnectToDaemon(admin_address_, credentials))) {}

std::unique_ptr<grpc::ClientContext> Ctl::Context(
    absl::Duration timeout) const {
  return ContextWithTimeout(timeout);
}

}  // namespace neffd::ctl
