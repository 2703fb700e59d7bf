#include "tests/harness/temp_dir.h"

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace neffd::test_support {

std::string NewTempDir(const std::string& name) {
  const char* root = std::getenv("TEST_TMPDIR");
  const std::string dir =
      absl::StrCat(root != nullptr ? root : "/tmp", "/", name);
  std::error_code error;
  std::filesystem::remove_all(dir, error);
  std::filesystem::create_directories(dir, error);
  if (error) {
    std::cerr << "cannot create " << dir << ": " << error.message() << "\n";
    std::abort();
  }
  return dir;
}

std::string CurrentTestName() {
  const ::testing::TestInfo* info =
      ::testing::UnitTest::GetInstance()->current_test_info();
  return info != nullptr ? info->name() : "";
}

std::string TestTempDir(const std::string& prefix) {
  return NewTempDir(prefix + CurrentTestName());
}

}  // namespace neffd::test_support
