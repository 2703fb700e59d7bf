#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/file_util.h"
#include "tests/harness/temp_dir.h"

namespace neffd {
namespace {

using test_support::NewTempDir;

std::string Pattern(size_t size) {
  std::string bytes(size, '\0');
  for (size_t i = 0; i < size; ++i) bytes[i] = static_cast<char>(i * 7 + 3);
  return bytes;
}

std::string ReadAll(const std::string &path) {
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

}  // namespace
}  // namespace neffd
