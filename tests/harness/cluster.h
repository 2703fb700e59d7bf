// tests/harness/cluster.h
//
// Several real neffd "hosts" on one machine sharing one store directory, as
// in a cluster on FSx (docs/ARCHITECTURE.md, "The parts"): each host has its
// own local dir, index, socket and --host_id; all share
// {root}/shared/{neff,hlo}. Ranks of a host get that host's environment
// (RankEnv) and run real rank processes.
#ifndef NEFFD_TESTS_HARNESS_CLUSTER_H_
#define NEFFD_TESTS_HARNESS_CLUSTER_H_

#include <memory>
#include <string>
#include <vector>

#include "tests/harness/process.h"

namespace neffd::test_support {

class Cluster {
 public:
  // `flags` are given to every daemon (e.g. --lease_ttl, --poll_interval).
  Cluster(std::string root, std::vector<std::string> flags);

  // Starts host `name`; `env` is added to its daemon's environment.
  DaemonProcess& AddHost(const std::string& name,
                         std::vector<std::string> env = {});
  DaemonProcess& host(size_t i) { return *hosts_[i]; }
  size_t size() const { return hosts_.size(); }

  std::string shared_neff() const { return root_ + "/shared/neff"; }
  const std::string& root() const { return root_; }

  // The environment of rank `rank` on host `i`.
  std::vector<std::string> RankEnv(size_t i, int rank) const;

  // A rank_sim process on host `i` (see examples/rank_sim.cc), with `args`.
  std::unique_ptr<Process> StartRank(size_t i, int rank,
                                     std::vector<std::string> args) const;

 private:
  std::string root_;
  std::vector<std::string> flags_;
  std::vector<std::string> names_;
  std::vector<std::unique_ptr<DaemonProcess>> hosts_;
};

// Lines of a file (an empty file has none).
std::vector<std::string> ReadLines(const std::string& path);

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_HARNESS_CLUSTER_H_
