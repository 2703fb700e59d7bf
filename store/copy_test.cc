#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/file_util.h"
#include "store/testing/fault_injection_env.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

using test_support::NewTempDir;

std::string Pattern(size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i * 7 + 3);
  return bytes;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Between two files of one filesystem the kernel copies; every byte and
// nothing more must arrive, from wherever the source's offset stood.
TEST(CopyFileContentsTest, CopiesFileToFileFromTheCurrentOffset) {
  const std::string dir = NewTempDir("file_to_file");
  const std::string content = Pattern(3 * 1024 * 1024 + 17);
  std::ofstream(dir + "/in", std::ios::binary) << content;
  UniqueFd in(open((dir + "/in").c_str(), O_RDONLY));
  UniqueFd out(open((dir + "/out").c_str(), O_WRONLY | O_CREAT, 0644));
  ASSERT_TRUE(in.valid() && out.valid());
  ASSERT_EQ(lseek(in.get(), 5, SEEK_SET), 5);
  absl::StatusOr<uint64_t> copied = CopyFileContents(in.get(), out.get(), "x");
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(*copied, content.size() - 5);
  EXPECT_TRUE(ReadAll(dir + "/out") == content.substr(5));
}

// From a pipe copy_file_range refuses; the buffered copy takes over.
TEST(CopyFileContentsTest, CopiesFromAPipeThroughABuffer) {
  const std::string dir = NewTempDir("pipe_to_file");
  const std::string content = Pattern(2 * 1024 * 1024 + 1);
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  UniqueFd read_end(fds[0]);
  std::thread writer([&, write_end = fds[1]] {
    EXPECT_TRUE(WriteAll(write_end, content, "pipe").ok());
    close(write_end);
  });
  UniqueFd out(open((dir + "/out").c_str(), O_WRONLY | O_CREAT, 0644));
  absl::StatusOr<uint64_t> copied =
      CopyFileContents(read_end.get(), out.get(), "pipe");
  writer.join();
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(*copied, content.size());
  EXPECT_TRUE(ReadAll(dir + "/out") == content);
}

TEST(CopyFileContentsTest, AnUnwritableTargetIsAnError) {
  const std::string dir = NewTempDir("unwritable");
  std::ofstream(dir + "/in") << "bytes";
  UniqueFd in(open((dir + "/in").c_str(), O_RDONLY));
  UniqueFd read_only(open((dir + "/in").c_str(), O_RDONLY));
  absl::StatusOr<uint64_t> copied =
      CopyFileContents(in.get(), read_only.get(), "the input");
  ASSERT_FALSE(copied.ok());
  EXPECT_NE(copied.status().message().find("the input"), std::string::npos)
      << copied.status();
}

// Issue 30: a file this process hashed already is copied by the kernel and
// not hashed again: CopyAndHash answers the remembered digest (here one
// that is not the bytes', which proves nothing hashed them).
TEST(CopyAndHashTest, ARememberedFileIsCopiedWithoutBeingHashedAgain) {
  const std::string dir = NewTempDir("remembered");
  const std::string content = Pattern(3 * 1024 * 1024 + 5);
  std::ofstream(dir + "/in", std::ios::binary) << content;
  UniqueFd in(open((dir + "/in").c_str(), O_RDONLY));
  UniqueFd out(open((dir + "/out").c_str(), O_WRONLY | O_CREAT, 0644));
  const std::string remembered(64, 'a');
  RememberVerified(in.get(), {content.size(), remembered});
  absl::StatusOr<CopyResult> copied = CopyAndHash(in.get(), out.get(), "in");
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(copied->size, content.size());
  EXPECT_EQ(copied->sha256, remembered);
  EXPECT_TRUE(ReadAll(dir + "/out") == content);
  // Forgotten, it is hashed like any other file.
  ForgetVerified(in.get());
  ASSERT_EQ(lseek(in.get(), 0, SEEK_SET), 0);
  UniqueFd again(open((dir + "/again").c_str(), O_WRONLY | O_CREAT, 0644));
  copied = CopyAndHash(in.get(), again.get(), "in");
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(copied->sha256, Sha256Hex(content));
}

TEST(CopyAndHashTest, ARememberedFileThatChangedIsHashed) {
  const std::string dir = NewTempDir("changed");
  std::ofstream(dir + "/in", std::ios::binary) << "first bytes";
  UniqueFd in(open((dir + "/in").c_str(), O_RDONLY));
  RememberVerified(in.get(), {11, std::string(64, 'a')});
  std::ofstream(dir + "/in", std::ios::binary | std::ios::app) << " and more";
  UniqueFd out(open((dir + "/out").c_str(), O_WRONLY | O_CREAT, 0644));
  absl::StatusOr<CopyResult> copied = CopyAndHash(in.get(), out.get(), "in");
  ASSERT_TRUE(copied.ok()) << copied.status();
  EXPECT_EQ(copied->sha256, Sha256Hex("first bytes and more"));
  EXPECT_EQ(ReadAll(dir + "/out"), "first bytes and more");
  ForgetVerified(in.get());
}

int Threads() {
  int n = 0;
  for (const auto& entry :
       std::filesystem::directory_iterator("/proc/self/task")) {
    (void)entry;
    ++n;
  }
  return n;
}

// A copy of more than one chunk writes on a pooled thread: copies one after
// another start no thread each, and copies at once each arrive whole.
TEST(CopyAndHashTest, LargeCopiesReuseTheirWriterThreads) {
  const std::string dir = NewTempDir("large");
  const std::string content = Pattern(5 * 1024 * 1024 + 3);
  std::ofstream(dir + "/in", std::ios::binary) << content;
  int threads_after_first = 0;
  for (int i = 0; i < 8; ++i) {
    UniqueFd in(open((dir + "/in").c_str(), O_RDONLY));
    const std::string out_path = absl::StrCat(dir, "/out", i);
    UniqueFd out(open(out_path.c_str(), O_WRONLY | O_CREAT, 0644));
    absl::StatusOr<CopyResult> copied = CopyAndHash(in.get(), out.get(), "in");
    ASSERT_TRUE(copied.ok()) << copied.status();
    EXPECT_EQ(copied->sha256, Sha256Hex(content));
    EXPECT_TRUE(ReadAll(out_path) == content);
    if (i == 0) threads_after_first = Threads();
  }
  EXPECT_EQ(Threads(), threads_after_first);
  std::vector<std::thread> copies;
  for (int t = 0; t < 3; ++t) {
    copies.emplace_back([&, t] {
      const std::string mine = content.substr(t);
      const std::string in_path = absl::StrCat(dir, "/in", t);
      std::ofstream(in_path, std::ios::binary) << mine;
      UniqueFd in(open(in_path.c_str(), O_RDONLY));
      const std::string out_path = absl::StrCat(dir, "/at_once", t);
      UniqueFd out(open(out_path.c_str(), O_WRONLY | O_CREAT, 0644));
      absl::StatusOr<CopyResult> copied =
          CopyAndHash(in.get(), out.get(), "in");
      ASSERT_TRUE(copied.ok()) << copied.status();
      EXPECT_EQ(copied->sha256, Sha256Hex(mine));
      EXPECT_TRUE(ReadAll(out_path) == mine);
    });
  }
  for (std::thread& t : copies) t.join();
}

// Issue 30: one read and one hash, two copies: the tee gets every byte the
// output gets, whether the copy is one chunk or pipelined, and the digest
// is of those bytes. A remembered source is hashed anyway when teed.
TEST(CopyAndHashTest, ATeeGetsEveryByteOfTheSamePass) {
  const std::string dir = NewTempDir("tee");
  for (size_t size : {size_t{0}, size_t{4096}, size_t{3 * 1024 * 1024 + 5}}) {
    const std::string content = Pattern(size);
    const std::string in_path = absl::StrCat(dir, "/in", size);
    std::ofstream(in_path, std::ios::binary) << content;
    UniqueFd in(open(in_path.c_str(), O_RDONLY));
    RememberVerified(in.get(), CopyResult{size, "not-its-digest"});
    const std::string out_path = absl::StrCat(dir, "/out", size);
    const std::string tee_path = absl::StrCat(dir, "/tee", size);
    UniqueFd out(open(out_path.c_str(), O_WRONLY | O_CREAT, 0644));
    UniqueFd tee(open(tee_path.c_str(), O_WRONLY | O_CREAT, 0644));
    absl::StatusOr<CopyResult> copied =
        CopyAndHash(in.get(), out.get(), "in", {}, {tee.get(), "tee"});
    ASSERT_TRUE(copied.ok()) << copied.status();
    EXPECT_EQ(copied->size, size);
    EXPECT_EQ(copied->sha256, Sha256Hex(content));
    EXPECT_TRUE(ReadAll(out_path) == content) << size;
    EXPECT_TRUE(ReadAll(tee_path) == content) << size;
    ForgetVerified(in.get());
  }
}

TEST(CopyAndHashTest, AFailingTeeFailsTheCopy) {
  const std::string dir = NewTempDir("tee_fails");
  const std::string content = Pattern(2 * 1024 * 1024);
  std::ofstream(dir + "/in", std::ios::binary) << content;
  UniqueFd in(open((dir + "/in").c_str(), O_RDONLY));
  UniqueFd out(open((dir + "/out").c_str(), O_WRONLY | O_CREAT, 0644));
  UniqueFd read_only(open((dir + "/in").c_str(), O_RDONLY));
  absl::StatusOr<CopyResult> copied =
      CopyAndHash(in.get(), out.get(), "in", {}, {read_only.get(), "the tee"});
  EXPECT_FALSE(copied.ok());
  EXPECT_TRUE(absl::StrContains(copied.status().message(), "the tee"))
      << copied.status();
}

// A large copy whose output the caller will fsync flushes it while it
// copies; the error of such a flush is the copy's (the fsync after it would
// no longer see it). Without sync_out_behind nothing is flushed.
TEST(CopyAndHashTest, AFailedFlushBehindFailsTheCopy) {
  const std::string dir = NewTempDir("flush_behind");
  const std::string content = Pattern(40 * 1024 * 1024);
  std::ofstream(dir + "/in", std::ios::binary) << content;
  FaultInjectionEnv env;
  env.FailEvery(FsOp::kSync, EIO, "out");
  for (bool sync_behind : {false, true}) {
    UniqueFd in(open((dir + "/in").c_str(), O_RDONLY));
    UniqueFd out(
        open((dir + "/out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644));
    absl::StatusOr<CopyResult> copied = CopyAndHash(
        in.get(), out.get(), "in", {&env, dir + "/out", sync_behind});
    if (!sync_behind) {
      ASSERT_TRUE(copied.ok()) << copied.status();
      EXPECT_EQ(copied->sha256, Sha256Hex(content));
      continue;
    }
    EXPECT_FALSE(copied.ok());
    EXPECT_TRUE(absl::StrContains(copied.status().message(), "/out"))
        << copied.status();
  }
}

}  // namespace
}  // namespace neffd
