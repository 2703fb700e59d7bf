// tests/rank_fleet.h
//
// Simulated training ranks for client tests: starts N rank processes
// (examples/rank_sim or examples/rank_sim.py) with a rank's environment on
// one test root, waits for them, and checks what they printed and compiled.
//
// Not thread-safe.
#ifndef NEFFD_TESTS_RANK_FLEET_H_
#define NEFFD_TESTS_RANK_FLEET_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tests/harness/process.h"

namespace neffd::test_support {

struct RankReport {
  int exit_code = -1;
  std::string out;
  std::string err;
  // graph -> "sha256 path" for each OK line.
  std::map<int, std::string> ok;
};

class RankFleet {
 public:
  // Ranks use {root}/neff, /hlo, /local (the DaemonProcess layout), /debug,
  // and reach the daemon at `address` (a dead socket for fallback mode).
  RankFleet(std::string root, std::string address);

  // The command of one rank: {binary, flags...}; RANK and the cache
  // variables are added to its environment, plus `env`.
  void Start(int ranks, const std::vector<std::string>& command,
             const std::vector<std::string>& env = {});
  // Starts one more rank numbered `rank`.
  Process& StartOne(int rank, const std::vector<std::string>& command,
                    const std::vector<std::string>& env = {});

  std::vector<RankReport> WaitAll();

  // The fake compiler's log: one "key pid rank" line per compile.
  std::string compile_log() const { return root_ + "/compiles.txt"; }
  std::vector<std::string> Compiles() const;
  // Ranks whose stderr already says they work in fallback mode (the
  // client's one warning when it cannot reach the daemon).
  int FellBack() const;

  std::string root() const { return root_; }

 private:
  const std::string root_;
  const std::string address_;
  std::vector<std::unique_ptr<Process>> ranks_;
};

// Runfile of the C++ rank simulator and the arguments the tests share.
std::vector<std::string> RankSimCommand(
    const std::string& compile_log, int graphs, int compile_ms,
    const std::vector<std::string>& more = {});

// Every rank exited 0 with one OK line for each of `graphs` graphs, and for
// each graph all ranks read the same bytes (with `same_path`, the same
// entry). Reports failures with gtest's EXPECT_*.
void ExpectRanksAgree(const std::vector<RankReport>& reports, int graphs,
                      bool same_path = true);

// Number of regular files under `dir` (recursively); 0 if it does not exist.
int CountFiles(const std::string& dir);

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_RANK_FLEET_H_
