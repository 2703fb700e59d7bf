#include "store/liveness.h"

#include <signal.h>

#include <cerrno>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "store/file_util.h"

namespace neffd {
namespace {

struct ProcState {
  char state = '?';
  uint64_t start_time = 0;
};

// /proc/{pid}/stat is "pid (comm) state ppid ..."; comm may contain spaces and
// parentheses, so fields are counted from the last ')'. starttime is field 22.
std::optional<ProcState> ReadProcState(int64_t pid) {
  absl::StatusOr<std::string> stat =
      ReadSmallFile(absl::StrCat("/proc/", pid, "/stat"), 4096);
  if (!stat.ok()) return std::nullopt;
  size_t close = stat->rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::vector<absl::string_view> fields = absl::StrSplit(
      absl::string_view(*stat).substr(close + 1), ' ', absl::SkipEmpty());
  // fields[0] is field 3 (state); field 22 is fields[19].
  if (fields.size() < 20 || fields[0].empty()) return std::nullopt;
  ProcState ps;
  ps.state = fields[0][0];
  if (!absl::SimpleAtoi(fields[19], &ps.start_time)) return std::nullopt;
  return ps;
}

// A zombie has exited; only its parent has not collected it yet.
bool IsExited(const ProcState& ps) {
  return ps.state == 'Z' || ps.state == 'X';
}

class ProcLiveness : public Liveness {
 public:
  explicit ProcLiveness(std::string host) : host_(std::move(host)) {}

  std::optional<uint64_t> Observe(const HolderInfo& holder) override {
    if (holder.host != host_ || holder.pid <= 0) return std::nullopt;
    std::optional<ProcState> ps = ReadProcState(holder.pid);
    if (!ps.has_value() || IsExited(*ps)) {
      // The pid is not ours to see (pid namespace): rely on the TTL.
      return std::nullopt;
    }
    return ps->start_time;
  }

  bool IsAlive(const HolderInfo& holder, uint64_t token) override {
    std::optional<ProcState> ps = ReadProcState(holder.pid);
    return ps.has_value() && !IsExited(*ps) && ps->start_time == token;
  }

 private:
  const std::string host_;
};

}  // namespace

std::unique_ptr<Liveness> NewProcLiveness(std::string local_host_id) {
  return std::make_unique<ProcLiveness>(std::move(local_host_id));
}

bool ProcessIsGone(int64_t pid) {
  if (std::optional<ProcState> ps = ReadProcState(pid)) return IsExited(*ps);
  // No readable /proc entry: gone, unless /proc is not what it seems.
  return kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH;
}

}  // namespace neffd
