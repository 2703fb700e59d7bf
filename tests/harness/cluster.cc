#include "tests/harness/cluster.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace neffd::test_support {

Cluster::Cluster(std::string root, std::vector<std::string> flags)
    : root_(std::move(root)), flags_(std::move(flags)) {}

DaemonProcess& Cluster::AddHost(const std::string& name,
                                std::vector<std::string> env) {
  std::vector<std::string> flags = {"--cache_dir=" + root_ + "/shared/neff",
                                    "--hlo_cache_dir=" + root_ + "/shared/hlo",
                                    "--host_id=" + name};
  flags.insert(flags.end(), flags_.begin(), flags_.end());
  hosts_.push_back(std::make_unique<DaemonProcess>(
      absl::StrCat(root_, "/", name), flags, std::move(env)));
  names_.push_back(name);
  if (!hosts_.back()->Start()) {
    fprintf(stderr, "host %s did not start: %s\n", name.c_str(),
            hosts_.back()->process().Stderr().c_str());
  }
  return *hosts_.back();
}

std::vector<std::string> Cluster::RankEnv(size_t i, int rank) const {
  const DaemonProcess& host = *hosts_[i];
  return {
      "NEFFD_ADDRESS=" + host.address(),
      "TORCH_NEURONX_NEFF_CACHE_DIR=" + root_ + "/shared/neff",
      "TORCH_NEURONX_HLO_CACHE_DIR=" + root_ + "/shared/hlo",
      "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR=" + host.local_dir(),
      "TORCH_NEURONX_DEBUG_DIR=" + host.root() + "/debug",
      absl::StrCat("RANK=", rank),
  };
}

std::unique_ptr<Process> Cluster::StartRank(
    size_t i, int rank, std::vector<std::string> args) const {
  std::vector<std::string> argv = {Runfile("examples/rank_sim")};
  argv.insert(argv.end(), args.begin(), args.end());
  return std::make_unique<Process>(argv, RankEnv(i, rank));
}

std::vector<std::string> ReadLines(const std::string& path) {
  return absl::StrSplit(ReadFile(path), '\n', absl::SkipEmpty());
}

}  // namespace neffd::test_support
