// tests/torchneuron_host.h
//
// A host shared with unmodified TorchNeuron ranks, for the issue 27 tests: a
// real neffd on its own root (polling flocks every 0.2 s), and ranks that
// replay TorchNeuron's published cache algorithm (tests/torchneuron_rank.py,
// which links nothing of neffd's) on the daemon's directories.
//
// `Base` is ::testing::Test or a ::testing::TestWithParam<T>. Not
// thread-safe.
#ifndef NEFFD_TESTS_TORCHNEURON_HOST_H_
#define NEFFD_TESTS_TORCHNEURON_HOST_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"

namespace neffd::test_support {

template <typename Base>
class TorchNeuronHost : public Base {
 protected:
  void SetUp() override {
    root_ = TestTempDir();
    daemon_ = std::make_unique<DaemonProcess>(
        root_, std::vector<std::string>{"--poll_interval=0.2"});
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
  }

  // An unmodified TorchNeuron rank asking for `key` on this host, with its
  // cache in `cache_dir` (default: the daemon's neff store). With
  // `hold_until` it keeps the lock after LOCKED until that file exists;
  // `neff` is what it writes when it compiles.
  std::unique_ptr<Process> UnmodifiedRank(const std::string& key,
                                          const std::string& hold_until = "",
                                          const std::string& neff = "neff",
                                          std::string cache_dir = "") {
    if (cache_dir.empty()) cache_dir = daemon_->neff_dir();
    std::vector<std::string> argv = {"/usr/bin/python3",
                                     Runfile("tests/torchneuron_rank.py"),
                                     "--cache_dir=" + cache_dir,
                                     "--local_dir=" + daemon_->local_dir(),
                                     "--key=" + key,
                                     "--neff=" + neff};
    if (!hold_until.empty()) argv.push_back("--hold_until=" + hold_until);
    return std::make_unique<Process>(argv);
  }

  // What an unmodified rank did (WAITING, LOCKED, HIT, ...), without the
  // "KEY k SHA256 s" line it ends with.
  static std::string Events(Process& p) {
    std::string out;
    for (absl::string_view line :
         absl::StrSplit(p.Stdout(), '\n', absl::SkipEmpty())) {
      if (!absl::StartsWith(line, "KEY ")) absl::StrAppend(&out, line, "\n");
    }
    return out;
  }

  // Waits until `p` printed `text`.
  static bool Said(Process& p, const std::string& text) {
    return WaitUntil([&] { return absl::StrContains(p.Stdout(), text); },
                     absl::Seconds(60));
  }

  std::string root_;
  std::unique_ptr<DaemonProcess> daemon_;
};

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_TORCHNEURON_HOST_H_
