// Key derivation: flag canonicalisation, what changes a key and what does
// not, and known-answer vectors. The vectors pin the on-disk key format: if
// one of them changes, every existing cache is invalidated; bump the format
// tag ("neffd-key-v1") instead of editing them.
#include "client/key.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace neffd {
namespace {

TEST(CanonicalCompilerFlagsTest, DropsPathOnlyFlagsInBothForms) {
  EXPECT_EQ(CanonicalCompilerFlags("--model-type=transformer "
                                   "--logfile=/tmp/r0/log-neuron-cc.txt -O1"),
            "--model-type=transformer -O1");
  EXPECT_EQ(CanonicalCompilerFlags("-O1 --logfile /tmp/r0/log.txt --lnc 2"),
            "-O1 --lnc 2");
  EXPECT_EQ(CanonicalCompilerFlags("--output=/w/a.neff -O2"), "-O2");
  EXPECT_EQ(CanonicalCompilerFlags("--output /w/a.neff -O2"), "-O2");
  EXPECT_EQ(CanonicalCompilerFlags("--workdir=/w -O2"), "-O2");
  EXPECT_EQ(CanonicalCompilerFlags("--workdir /w -O2 --auto-cast none"),
            "-O2 --auto-cast none");
}

TEST(CanonicalCompilerFlagsTest, NormalisesWhitespaceAndKeepsOrder) {
  EXPECT_EQ(
      CanonicalCompilerFlags("  -O1\t\t--lnc  2 \n --enable-fast-loading "),
      "-O1 --lnc 2 --enable-fast-loading");
  EXPECT_EQ(CanonicalCompilerFlags("--b --a"), "--b --a");
  EXPECT_EQ(CanonicalCompilerFlags(""), "");
  EXPECT_EQ(CanonicalCompilerFlags(" \t\n"), "");
}

TEST(CanonicalCompilerFlagsTest, KeepsFlagsThatOnlyLookSimilar) {
  // Prefixes are not the flag; a value that is itself a flag is not eaten.
  EXPECT_EQ(CanonicalCompilerFlags("--logfile-level=info --outputs=2"),
            "--logfile-level=info --outputs=2");
  EXPECT_EQ(CanonicalCompilerFlags("--workdir --lnc 2"), "--lnc 2");
  EXPECT_EQ(CanonicalCompilerFlags("-O1 --output"), "-O1");
}

TEST(CanonicalCompilerFlagsTest, ListFormMatchesStringForm) {
  const std::vector<std::string> args = {"--model-type=transformer",
                                         "--logfile", "/tmp/x/log.txt",
                                         "--lnc 2", "-O1"};
  EXPECT_EQ(CanonicalCompilerFlags(args),
            "--model-type=transformer --lnc 2 -O1");
}

KeyInputs Graph(absl::string_view flags) {
  KeyInputs in;
  in.hlo_bytes = "HloModule m\n";
  in.compiler_flags = flags;
  in.compiler_version = "2.19.8089.0";
  in.platform_target = "trn2";
  return in;
}

std::string Key(const KeyInputs& in, bool from_hlo = true) {
  absl::StatusOr<std::string> key = DeriveKey(in, from_hlo);
  EXPECT_TRUE(key.ok()) << key.status();
  return key.value_or("");
}

TEST(DeriveKeyTest, SameGraphFromTwoWorkingDirectoriesHasOneKey) {
  EXPECT_EQ(Key(Graph("-O1 --workdir /tmp/rank0 --logfile=/tmp/rank0/l.txt")),
            Key(Graph("-O1 --workdir=/home/u/run7 --logfile /x/y.txt")));
  EXPECT_EQ(Key(Graph("-O1  --lnc 2")), Key(Graph("-O1 --lnc 2")));
}

TEST(DeriveKeyTest, EverySemanticInputChangesTheKey) {
  const std::string base = Key(Graph("-O1"));
  KeyInputs other = Graph("-O1");
  other.compiler_version = "2.19.8090.0";
  EXPECT_NE(Key(other), base);
  other = Graph("-O1");
  other.platform_target = "trn3";
  EXPECT_NE(Key(other), base);
  other = Graph("-O1");
  other.hlo_bytes = "HloModule n\n";
  EXPECT_NE(Key(other), base);
  EXPECT_NE(Key(Graph("-O2")), base);
  EXPECT_NE(Key(Graph("-O1 --auto-cast none")), base);
  EXPECT_NE(Key(Graph("--lnc 2 -O1")), Key(Graph("-O1 --lnc 2")));  // order
}

TEST(DeriveKeyTest, FieldsCannotBleedIntoEachOther) {
  KeyInputs a = Graph("");
  a.compiler_version = "1.0";
  a.platform_target = "trn2";
  KeyInputs b = Graph("");
  b.compiler_version = "1.0t";
  b.platform_target = "rn2";
  EXPECT_NE(Key(a), Key(b));
}

TEST(DeriveKeyTest, BaseKeyModeUsesTheBaseKeyHashedTheSameWay) {
  KeyInputs in = Graph("-O1");
  in.base_key = "graph-42";
  const std::string from_base = Key(in, /*from_hlo=*/false);
  in.hlo_bytes = "HloModule edited\n";  // ignored in base-key mode
  EXPECT_EQ(Key(in, false), from_base);
  EXPECT_NE(Key(in, true), from_base);
  in.base_key = "graph-43";
  EXPECT_NE(Key(in, false), from_base);
  // The source kind is part of the record: HLO bytes equal to a base key do
  // not give the same key.
  KeyInputs same_text = Graph("-O1");
  same_text.hlo_bytes = "graph-42";
  same_text.base_key = "graph-42";
  EXPECT_NE(Key(same_text, true), Key(same_text, false));
}

TEST(DeriveKeyTest, EmptySourceOrVersionIsRefusedNamingTheField) {
  KeyInputs in = Graph("");
  in.hlo_bytes = "";
  absl::StatusOr<std::string> key = DeriveKey(in, true);
  EXPECT_TRUE(absl::IsInvalidArgument(key.status()));
  EXPECT_NE(key.status().message().find("hlo_bytes"), std::string::npos);
  key = DeriveKey(Graph(""), false);
  EXPECT_NE(key.status().message().find("base_key"), std::string::npos);
  in = Graph("");
  in.compiler_version = "";
  EXPECT_NE(DeriveKey(in, true).status().message().find("compiler_version"),
            std::string::npos);
}

// Computed once (and cross-checked with an independent Python hashlib
// implementation of the record format in client/key.h); never edit.
TEST(DeriveKeyTest, KnownAnswerVectors) {
  EXPECT_EQ(Key(Graph("--model-type=transformer -O1")),
            "9f96ad9aba9968a7345a19f1e6763f81a33ec096d5666228d1e3437e841cd103");
  EXPECT_EQ(Key(Graph("--model-type=transformer -O1 "
                      "--logfile=/tmp/a/log.txt --workdir /tmp/a")),
            "9f96ad9aba9968a7345a19f1e6763f81a33ec096d5666228d1e3437e841cd103");
  KeyInputs base = Graph("");
  base.base_key = "graph-42";
  EXPECT_EQ(Key(base, false),
            "259234a8aea5020ddac8fd9c087a5c7f99cfe9b58c2114e7e1facce9d2111845");
  std::string all_bytes;
  for (int i = 0; i < 256; ++i) all_bytes.push_back(static_cast<char>(i));
  KeyInputs binary;
  binary.hlo_bytes = all_bytes;
  binary.compiler_version = "1.0";
  EXPECT_EQ(Key(binary),
            "c6f9caff8a47ef1394f316d384a69ebfef2e216c6c2738304cacbac1ef47ab12");
}

}  // namespace
}  // namespace neffd
