// 64 neffctl processes publish different bytes under one key at once: the
// daemon lets exactly one publish and tells the other 63 it is cached.
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"
#include "tests/harness/store_files.h"

namespace neffd::test_support {
namespace {

TEST(ConcurrentPutTest, SixtyFourPutsOfOneKeyPublishExactlyOnce) {
  const std::string root = NewTempDir("concurrent_put");
  DaemonProcess daemon(root);
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  constexpr int kPuts = 64;
  std::vector<std::string> contents;
  std::vector<std::unique_ptr<Process>> puts;
  for (int i = 0; i < kPuts; ++i) {
    contents.push_back(absl::StrCat("neff from rank ", i, "\n",
                                    std::string(50000 + i, 'a' + i % 26)));
    const std::string file = absl::StrCat(root, "/rank", i, ".neff");
    WriteFile(file, contents.back());
    puts.push_back(std::make_unique<Process>(std::vector<std::string>{
        Runfile("client/neffctl"), "--address=" + daemon.address(), "--json",
        "put", "neff", "0123abcd", file, "--compiler_version=2.19.1"}));
  }
  int published = 0, already_cached = 0, winner = -1;
  for (int i = 0; i < kPuts; ++i) {
    EXPECT_EQ(puts[i]->Wait(), 0) << puts[i]->Stderr();
    const std::string out = puts[i]->Stdout();
    if (absl::StrContains(out, "\"outcome\":\"PUBLISHED\"")) {
      ++published;
      winner = i;
    } else if (absl::StrContains(out, "\"outcome\":\"ALREADY_CACHED\"")) {
      ++already_cached;
    } else {
      ADD_FAILURE() << "put " << i << " printed: " << out;
    }
  }
  if (HasFailure()) ADD_FAILURE() << "daemon: " << daemon.process().Stderr();
  EXPECT_EQ(published, 1);
  EXPECT_EQ(already_cached, kPuts - 1);
  ASSERT_GE(winner, 0);
  EXPECT_EQ(ReadFile(FilesOf(root + "/neff", "0123abcd").artifact),
            contents[winner]);
}

}  // namespace
}  // namespace neffd::test_support
