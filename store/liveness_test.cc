#include "store/liveness.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "store/file_util.h"

namespace neffd {
namespace {

TEST(ProcessIsGoneTest, RunningProcessIsNotGone) {
  EXPECT_FALSE(ProcessIsGone(getpid()));
  EXPECT_FALSE(ProcessIsGone(getppid()));
}

// A rank killed while its launcher is busy stays a zombie for a while; its
// staged files and leases must count as abandoned all the same.
TEST(ProcessIsGoneTest, ExitedChildIsGoneBeforeAndAfterItIsReaped) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  const std::string stat = absl::StrCat("/proc/", child, "/stat");
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  bool zombie = false;
  while (!zombie && absl::Now() < deadline) {
    absl::StatusOr<std::string> text = ReadSmallFile(stat, 4096);
    ASSERT_TRUE(text.ok()) << text.status();  // not reaped: still listed
    zombie = absl::StrContains(text->substr(text->rfind(')')), " Z ");
    if (!zombie) absl::SleepFor(absl::Milliseconds(1));
  }
  ASSERT_TRUE(zombie);
  EXPECT_EQ(kill(child, 0), 0);  // what the old check was fooled by
  EXPECT_TRUE(ProcessIsGone(child));
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  EXPECT_TRUE(ProcessIsGone(child));
}

}  // namespace
}  // namespace neffd
