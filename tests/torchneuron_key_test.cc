// TorchNeuron's persistent cache key (client/torchneuron_key.h) against the
// reference implementation an operator has: `xxhsum -H2` (Debian's xxhash
// package) run as a separate process over the same bytes, for inputs that
// cross XXH3's internal size classes, plus fixed vectors that pin the format
// (high 64 bits first, zero-padded lowercase hex).
#include "client/torchneuron_key.h"

#include <unistd.h>

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

constexpr char kXxhsum[] = "/usr/bin/xxhsum";

// What `xxhsum -H2` prints for the file holding `bytes`: its first field.
std::string Xxhsum128(const std::string& dir, const std::string& bytes) {
  const std::string path = dir + "/input";
  WriteFile(path, bytes);
  CommandResult run = RunCommand({kXxhsum, "-H2", path});
  EXPECT_EQ(run.exit_code, 0)
      << run.err << " (deploy/install-deps.sh installs xxhash)";
  return run.out.substr(0, run.out.find(' '));
}

// Bytes 0..255 repeated: NULs and high bytes included.
std::string Pattern(size_t size) {
  std::string out(size, '\0');
  for (size_t i = 0; i < size; ++i) out[i] = static_cast<char>((i * 31) % 256);
  return out;
}

TEST(TorchNeuronKeyTest, FixedVectors) {
  // XXH3-128 of nothing, the published value.
  EXPECT_EQ(TorchNeuronKey("", ""), "99aa06d3014798d86001c324468d497f");
  EXPECT_EQ(TorchNeuronKey("basekey", "HloModule m\n"),
            "c496e666b3b31b0b526f14746a3df645");
  // The key hashes the concatenation: where the base key ends is not part
  // of it (TorchNeuron appends the IR to the base key's bytes).
  EXPECT_EQ(TorchNeuronKey("base", "keyHloModule m\n"),
            TorchNeuronKey("basekey", "HloModule m\n"));
  EXPECT_EQ(TorchNeuronKey("", "abc"), "06b05ab6733a618578af5f94892f3950");
  EXPECT_EQ(TorchNeuronKey("abc", "").size(), kTorchNeuronKeyLength);
}

TEST(TorchNeuronKeyTest, MatchesXxhsumOnReferenceInputs) {
  ASSERT_EQ(access(kXxhsum, X_OK), 0)
      << kXxhsum << " is missing: run deploy/install-deps.sh";
  const std::string dir = TestTempDir();
  // Sizes at XXH3's boundaries (0, 1-3, 4-8, 9-16, 17-128, 129-240, long
  // inputs over one and several stripes/blocks) and a 1 MiB IR.
  for (size_t size : {0, 1, 3, 4, 8, 9, 16, 17, 128, 129, 240, 241, 1024, 1025,
                      4096, 65537, 1 << 20}) {
    const std::string ir = Pattern(size);
    for (const std::string& base :
         {std::string(), std::string("compiler-config-v1 -O1 --lnc 2"),
          Pattern(300)}) {
      SCOPED_TRACE(absl::StrCat("ir ", size, " bytes, base key ", base.size(),
                                " bytes"));
      EXPECT_EQ(TorchNeuronKey(base, ir), Xxhsum128(dir, base + ir));
    }
  }
}

}  // namespace
}  // namespace neffd::test_support
