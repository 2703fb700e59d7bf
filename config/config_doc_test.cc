// Fails when the committed docs/CONFIG.md is not what the registry renders.

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "config/render.h"
#include "gtest/gtest.h"

namespace neffd::config {
namespace {

TEST(ConfigDoc, CommittedDocMatchesTheRegistry) {
  const std::string path =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/",
                   std::getenv("TEST_WORKSPACE"), "/docs/CONFIG.md");
  std::ifstream file(path);
  ASSERT_TRUE(file) << "cannot read " << path;
  std::stringstream committed;
  committed << file.rdbuf();
  // Not EXPECT_EQ: a diff of the whole document is noise. Say what to do.
  EXPECT_TRUE(committed.str() == RenderMarkdown())
      << "docs/CONFIG.md is stale; regenerate it from the workspace root:\n"
         "  bazel run //config:neuronx-env -- --markdown > docs/CONFIG.md";
}

}  // namespace
}  // namespace neffd::config
