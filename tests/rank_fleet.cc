#include "tests/rank_fleet.h"

#include <filesystem>
#include <map>
#include <set>
#include <system_error>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace neffd::test_support {

RankFleet::RankFleet(std::string root, std::string address)
    : root_(std::move(root)), address_(std::move(address)) {}

Process& RankFleet::StartOne(int rank, const std::vector<std::string>& command,
                             const std::vector<std::string>& env) {
  std::vector<std::string> full_env = {
      "NEFFD_ADDRESS=" + address_,
      "TORCH_NEURONX_NEFF_CACHE_DIR=" + root_ + "/neff",
      "TORCH_NEURONX_HLO_CACHE_DIR=" + root_ + "/hlo",
      "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR=" + root_ + "/local",
      "TORCH_NEURONX_DEBUG_DIR=" + root_ + "/debug",
      absl::StrCat("RANK=", rank),
  };
  full_env.insert(full_env.end(), env.begin(), env.end());
  ranks_.push_back(std::make_unique<Process>(command, full_env));
  return *ranks_.back();
}

void RankFleet::Start(int ranks, const std::vector<std::string>& command,
                      const std::vector<std::string>& env) {
  for (int r = 0; r < ranks; ++r) StartOne(r, command, env);
}

std::vector<RankReport> RankFleet::WaitAll() {
  std::vector<RankReport> reports;
  for (std::unique_ptr<Process>& p : ranks_) {
    RankReport report;
    report.exit_code = p->Wait();
    report.out = p->Stdout();
    report.err = p->Stderr();
    for (absl::string_view line :
         absl::StrSplit(report.out, '\n', absl::SkipEmpty())) {
      // OK <graph> <key> [<source>] <sha256> <path>
      std::vector<std::string> f = absl::StrSplit(line, ' ');
      int graph = 0;
      if (f.size() >= 5 && f[0] == "OK" && absl::SimpleAtoi(f[1], &graph)) {
        report.ok[graph] = absl::StrCat(f[f.size() - 2], " ", f.back());
      }
    }
    reports.push_back(std::move(report));
  }
  ranks_.clear();
  return reports;
}

std::vector<std::string> RankFleet::Compiles() const {
  return absl::StrSplit(ReadFile(compile_log()), '\n', absl::SkipEmpty());
}

int RankFleet::FellBack() const {
  int fell_back = 0;
  for (const std::unique_ptr<Process>& rank : ranks_) {
    fell_back += absl::StrContains(rank->Stderr(), "fallback mode");
  }
  return fell_back;
}

std::vector<std::string> RankSimCommand(const std::string& compile_log,
                                        int graphs, int compile_ms,
                                        const std::vector<std::string>& more) {
  std::vector<std::string> command = {
      Runfile("examples/rank_sim"), "--compile_log=" + compile_log,
      absl::StrCat("--graphs=", graphs),
      absl::StrCat("--compile_ms=", compile_ms)};
  command.insert(command.end(), more.begin(), more.end());
  return command;
}

void ExpectRanksAgree(const std::vector<RankReport>& reports, int graphs,
                      bool same_path) {
  std::map<int, std::set<std::string>> seen;
  for (size_t r = 0; r < reports.size(); ++r) {
    EXPECT_EQ(reports[r].exit_code, 0) << "rank " << r << ":\n"
                                       << reports[r].out << reports[r].err;
    EXPECT_EQ(reports[r].ok.size(), static_cast<size_t>(graphs))
        << "rank " << r << ":\n"
        << reports[r].out;
    for (const auto& [graph, got] : reports[r].ok) {
      seen[graph].insert(same_path ? got : got.substr(0, got.find(' ')));
    }
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(graphs));
  for (const auto& [graph, versions] : seen) {
    EXPECT_EQ(versions.size(), 1u) << "graph " << graph;
  }
}

int CountFiles(const std::string& dir) {
  std::error_code ec;
  int files = 0;
  for (std::filesystem::recursive_directory_iterator it(dir, ec), end;
       !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) ++files;
  }
  return files;
}

}  // namespace neffd::test_support
