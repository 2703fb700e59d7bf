// tests/harness/temp_dir.h
//
// Scratch directories for tests, shared by the unit tests of every package
// and the integration tests: a fresh, empty directory under TEST_TMPDIR
// (/tmp when run outside Bazel), by default named after the running test
// case so that cases of one binary never share state.
//
// Not thread-safe against another thread creating or removing the same name;
// distinct names may be used from any thread.
#ifndef NEFFD_TESTS_HARNESS_TEMP_DIR_H_
#define NEFFD_TESTS_HARNESS_TEMP_DIR_H_

#include <string>

namespace neffd::test_support {

// TEST_TMPDIR/`name`, emptied of anything an earlier run left and created.
// Aborts the test binary if it cannot be created.
std::string NewTempDir(const std::string& name);

// The running gtest case's name, e.g. "ServesHit" ("" outside a case).
std::string CurrentTestName();

// NewTempDir(prefix + CurrentTestName()).
std::string TestTempDir(const std::string& prefix = "");

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_HARNESS_TEMP_DIR_H_
