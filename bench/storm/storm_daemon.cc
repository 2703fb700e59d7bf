#include "bench/storm/storm_daemon.h"

#include <unistd.h>

#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"

namespace neffd::bench {
namespace {

uint64_t StatField(const std::string& json, const std::string& name) {
  const std::string field = "\"" + name + "\":\"";
  size_t at = json.find(field);
  return at == std::string::npos ? 0
                                 : std::stoull(json.substr(at + field.size()));
}

test_support::CommandResult JsonStats(test_support::DaemonProcess& daemon) {
  return test_support::RunCommand({test_support::Runfile("client/neffctl"),
                                   "--address=" + daemon.address(), "--json",
                                   "stats"});
}

// Bytes the process has passed through read(2) so far, from any file or
// socket (/proc/<pid>/io rchar).
uint64_t ReadChars(pid_t pid) {
  std::string io = test_support::ReadFile(absl::StrCat("/proc/", pid, "/io"));
  size_t at = io.find("rchar: ");
  return at == std::string::npos ? 0 : std::stoull(io.substr(at + 7));
}

// The value of `name=` in a log line ("" if absent).
absl::string_view LogValue(absl::string_view line, absl::string_view name) {
  const std::string field = absl::StrCat(" ", name, "=");
  size_t at = line.find(field);
  if (at == absl::string_view::npos) return "";
  absl::string_view v = line.substr(at + field.size());
  return v.substr(0, v.find(' '));
}

}  // namespace

std::unique_ptr<test_support::DaemonProcess> StartStormDaemon(
    const std::string& root, const std::vector<std::string>& flags) {
  // Info level: the daemon logs when it answered each key's waiters.
  auto daemon = std::make_unique<test_support::DaemonProcess>(
      root, flags, std::vector<std::string>{"TORCH_NEURONX_LOG_LEVEL=2"});
  if (!daemon->Start()) {
    std::fprintf(stderr, "neffd did not start\n");
    return nullptr;
  }
  return daemon;
}

DaemonFigures ReadDaemonFigures(test_support::DaemonProcess& daemon) {
  test_support::CommandResult stats = JsonStats(daemon);
  DaemonFigures figures;
  figures.store_metadata_ops = StatField(stats.out, "store_metadata_ops");
  figures.tier_filled_bytes = StatField(stats.out, "local_tier_filled_bytes");
  figures.cpu_s = CpuSeconds(daemon.process().pid());
  figures.read_chars = ReadChars(daemon.process().pid());
  return figures;
}

void WaitForUploads(test_support::DaemonProcess& daemon) {
  const absl::Time deadline = absl::Now() + absl::Minutes(10);
  while (absl::Now() < deadline) {
    test_support::CommandResult stats = JsonStats(daemon);
    if (stats.exit_code == 0 && StatField(stats.out, "upload_queue") == 0) {
      return;
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
  std::fprintf(stderr, "the daemon's S3 uploads did not finish\n");
}

DaemonAnswers ParseDaemonLog(const std::string& log) {
  DaemonAnswers answers;
  auto number = [](absl::string_view line, absl::string_view key) {
    int64_t value = 0;
    return absl::SimpleAtoi(LogValue(line, key), &value) ? value : 0;
  };
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    absl::string_view entry = LogValue(line, "entry");
    int g = -1;
    if (!absl::ConsumePrefix(&entry, "neff/bench/storm") ||
        !absl::SimpleAtoi(entry, &g)) {
      continue;
    }
    DaemonStep& step = answers.steps[g];
    if (absl::StrContains(line, "event=lock_granted")) {
      step.lock_started_us = number(line, "started_unix_us");
      step.lock_answered_us = number(line, "answered_unix_us");
    } else if (absl::StrContains(line, "event=published")) {
      step.publish_started_us = number(line, "started_unix_us");
      step.durable_us =
          step.publish_started_us + number(line, "since_publish_us");
    } else if (absl::StrContains(line, "event=waiters_answered")) {
      answers.answer_ms.push_back(number(line, "since_publish_us") / 1e3);
      step.renamed_us = number(line, "renamed_unix_us");
      step.answered_us = number(line, "answered_unix_us");
      if (step.renamed_us != 0) answers.released_us[g] = step.renamed_us;
    }
  }
  return answers;
}

}  // namespace neffd::bench
