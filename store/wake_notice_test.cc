#include "store/wake_notice.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

constexpr absl::Duration kProbe = absl::Milliseconds(50);

absl::Duration In(absl::Duration d) {
  return Env::Default()->MonotonicNow() + d;
}

class WakeNoticeTest : public ::testing::Test {
 protected:
  const std::string dir_ = test_support::TestTempDir();
  const std::string path_ = dir_ + "/n1";
  Env* env_ = Env::Default();
};

// What a waiting rank does: another process, its own mapping of the page.
// The child reports "<end> <answer>" on a pipe.
struct ChildWaiter {
  pid_t pid = -1;
  int from = -1;

  static ChildWaiter Start(const std::string& path, absl::Duration wait) {
    int fds[2];
    EXPECT_EQ(pipe(fds), 0);
    ChildWaiter child;
    child.pid = fork();
    if (child.pid == 0) {
      close(fds[0]);
      absl::StatusOr<WakeWait> w =
          WaitForNotice(Env::Default(), path, In(wait), kProbe);
      std::string out =
          w.ok() ? std::to_string(static_cast<int>(w->end)) + " " + w->answer
                 : "error " + w.status().ToString();
      (void)!write(fds[1], out.data(), out.size());
      _exit(0);
    }
    close(fds[1]);
    child.from = fds[0];
    return child;
  }

  std::string Result() {
    std::string out;
    char buf[256];
    ssize_t n;
    while ((n = read(from, buf, sizeof(buf))) > 0) out.append(buf, n);
    close(from);
    int status = 0;
    waitpid(pid, &status, 0);
    return out;
  }
};

// How many mappings of `path` process `pid` has (0 if it is gone).
int MappingsOf(pid_t pid, const std::string& path) {
  FILE* f = fopen(("/proc/" + std::to_string(pid) + "/maps").c_str(), "r");
  if (f == nullptr) return 0;
  int n = 0;
  char line[512];
  while (fgets(line, sizeof(line), f)) {
    n += std::string(line).find(path) != std::string::npos;
  }
  fclose(f);
  return n;
}

// Waits until child `pid` has mapped `path` itself (beyond the mapping it
// inherited from this process): it is waiting on the notice.
void WaitUntilMapped(pid_t pid, const std::string& path) {
  const int inherited = MappingsOf(getpid(), path);
  for (;;) {
    const int n = MappingsOf(pid, path);
    // Mapped, or an exited child (no mappings): its result says why.
    if (n == 0 || n > inherited) return;
    absl::SleepFor(absl::Milliseconds(1));
  }
}

std::string Answered(const std::string& answer) {
  return std::to_string(static_cast<int>(WakeWait::End::kAnswered)) + " " +
         answer;
}

TEST_F(WakeNoticeTest, OneAnswerWakesEveryWaitingProcess) {
  absl::StatusOr<std::unique_ptr<WakeNotice>> notice =
      WakeNotice::Create(env_, path_, 0440);
  ASSERT_TRUE(notice.ok()) << notice.status();
  struct stat st;
  ASSERT_EQ(stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0440u);
  std::vector<ChildWaiter> waiters;
  for (int i = 0; i < 4; ++i) {
    waiters.push_back(ChildWaiter::Start(path_, absl::Seconds(60)));
    WaitUntilMapped(waiters.back().pid, path_);
  }
  EXPECT_TRUE((*notice)->Answer("the entry"));
  EXPECT_FALSE((*notice)->Answer("another")) << "the first answer wins";
  for (ChildWaiter& w : waiters) EXPECT_EQ(w.Result(), Answered("the entry"));
  // A waiter that arrives after the answer reads it at once.
  ChildWaiter late = ChildWaiter::Start(path_, absl::Seconds(60));
  EXPECT_EQ(late.Result(), Answered("the entry"));
}

TEST_F(WakeNoticeTest, AnAnswerLargerThanAPageIsReadWhole) {
  auto notice = WakeNotice::Create(env_, path_, 0440);
  ASSERT_TRUE(notice.ok()) << notice.status();
  const std::string big(10000, 'x');
  ChildWaiter w = ChildWaiter::Start(path_, absl::Seconds(60));
  (*notice)->Answer(big);
  EXPECT_EQ(w.Result(), Answered(big));
}

TEST_F(WakeNoticeTest, ANoticeEndedWithoutAnAnswerSaysAskAgain) {
  auto notice = WakeNotice::Create(env_, path_, 0440);
  ASSERT_TRUE(notice.ok()) << notice.status();
  ChildWaiter w = ChildWaiter::Start(path_, absl::Seconds(60));
  // Let the child open it before it is removed (else it finds no notice).
  WaitUntilMapped(w.pid, path_);
  notice->reset();
  EXPECT_EQ(w.Result(), Answered(""));
  EXPECT_TRUE(absl::IsNotFound(
      WaitForNotice(env_, path_, In(absl::Seconds(1)), kProbe).status()))
      << "removed when it ended";
}

TEST_F(WakeNoticeTest, AWriterThatDiedIsSeenAsGone) {
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t writer = fork();
  if (writer == 0) {
    auto notice = WakeNotice::Create(Env::Default(), path_, 0440);
    (void)!write(ready[1], notice.ok() ? "y" : "n", 1);
    pause();  // killed holding the notice, never answering
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  ASSERT_EQ(c, 'y');
  ChildWaiter w = ChildWaiter::Start(path_, absl::Seconds(60));
  WaitUntilMapped(w.pid, path_);
  kill(writer, SIGKILL);
  waitpid(writer, nullptr, 0);
  EXPECT_EQ(w.Result(),
            std::to_string(static_cast<int>(WakeWait::End::kAbandoned)) + " ");
}

TEST_F(WakeNoticeTest, AWaitEndsAtItsDeadline) {
  auto notice = WakeNotice::Create(env_, path_, 0440);
  ASSERT_TRUE(notice.ok()) << notice.status();
  absl::StatusOr<WakeWait> w =
      WaitForNotice(env_, path_, In(absl::Milliseconds(120)), kProbe);
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_EQ(w->end, WakeWait::End::kTimedOut);
}

TEST_F(WakeNoticeTest, CreateRefusesAnExistingPathAndWaitRefusesANonNotice) {
  auto first = WakeNotice::Create(env_, path_, 0440);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_TRUE(
      absl::IsAlreadyExists(WakeNotice::Create(env_, path_, 0440).status()));
  const std::string small = dir_ + "/small";
  FILE* f = fopen(small.c_str(), "w");
  fputs("x", f);
  fclose(f);
  EXPECT_TRUE(absl::IsFailedPrecondition(
      WaitForNotice(env_, small, In(absl::Seconds(1)), kProbe).status()));
}

}  // namespace
}  // namespace neffd
