// `neffctl doctor` (client/neffctl/doctor.h): asks the daemon what it
// serves, runs the checks and prints one line per check.
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "client/neffctl/ctl.h"
#include "client/neffctl/doctor.h"
#include "google/protobuf/struct.pb.h"

namespace neffd::ctl {

int Ctl::Doctor() {
  DoctorOptions options;
  const char* path = std::getenv("PATH");
  options.path_env = path == nullptr ? "" : path;
  options.env = config::EnvSnapshot::FromProcessEnvironment();
  DaemonAnswers& daemon = options.daemon;
  daemon.address = address_;
  grpc::Status status = admin_->GetConfig(
      Context(absl::Seconds(5)).get(), v1::GetConfigRequest(), &daemon.config);
  if (status.ok()) {
    status = cache_->GetStats(Context(absl::Seconds(5)).get(),
                              v1::GetStatsRequest(), &daemon.stats);
  }
  if (!status.ok()) {
    daemon.reached = absl::UnavailableError(status.error_message());
  }
  const std::vector<DoctorCheck> checks = RunDoctor(options);
  const bool passed = AllPassed(checks);
  if (json_) {
    google::protobuf::Struct out;
    google::protobuf::ListValue* list =
        (*out.mutable_fields())["checks"].mutable_list_value();
    for (const DoctorCheck& check : checks) {
      google::protobuf::Struct* row =
          list->add_values()->mutable_struct_value();
      (*row->mutable_fields())["name"] = Str(check.name);
      (*row->mutable_fields())["state"] = Str(CheckStateName(check.state));
      (*row->mutable_fields())["finding"] = Str(check.finding);
      (*row->mutable_fields())["fix"] = Str(check.fix);
    }
    (*out.mutable_fields())["ok"].set_bool_value(passed);
    PrintJson(out);
  } else {
    for (const DoctorCheck& check : checks) {
      std::printf(
          "%-4s  %s: %s%s\n", CheckStateName(check.state), check.name.c_str(),
          check.finding.c_str(),
          check.fix.empty() ? "" : absl::StrCat("; fix: ", check.fix).c_str());
    }
  }
  return passed ? kOk : kMiss;
}

}  // namespace neffd::ctl
