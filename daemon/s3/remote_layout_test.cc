#include "daemon/s3/remote_layout.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace neffd::remote {
namespace {

EntryKey Key(absl::string_view ns) {
  return *EntryKey::Parse(ns, "2.19.1", "abc123");
}

TEST(RemoteLayoutTest, ObjectNamesFollowTheSharedStore) {
  absl::StatusOr<RemoteLocation> location =
      ParseRemoteUrl("s3://my-bucket/team/cache/");
  ASSERT_TRUE(location.ok()) << location.status();
  EXPECT_EQ(location->bucket, "my-bucket");
  EXPECT_EQ(location->prefix, "team/cache");
  EXPECT_EQ(location->Url(), "s3://my-bucket/team/cache");

  EXPECT_EQ(RemoteObjectName(*location, Key("neff"), RemoteFile::kArtifact),
            "team/cache/ab/c1/abc123.neff");
  EXPECT_EQ(RemoteObjectName(*location, Key("neff"), RemoteFile::kDoneRecord),
            "team/cache/ab/c1/abc123.neffd/model.done");
  EXPECT_EQ(RemoteObjectName(*location, Key("neff"), RemoteFile::kCompileFlags),
            "team/cache/ab/c1/abc123.neffd/compile_flags.json");
  EXPECT_EQ(RemoteObjectName(*location, Key("hlo"), RemoteFile::kArtifact),
            "team/cache/hlo/ab/c1/abc123.hlo");
}

TEST(RemoteLayoutTest, BucketRootHasNoLeadingSlash) {
  absl::StatusOr<RemoteLocation> location = ParseRemoteUrl("s3://bucket");
  ASSERT_TRUE(location.ok()) << location.status();
  EXPECT_EQ(location->prefix, "");
  EXPECT_EQ(RemoteObjectName(*location, Key("neff"), RemoteFile::kArtifact),
            "ab/c1/abc123.neff");
  EXPECT_EQ(RemoteObjectName(*location, Key("hlo"), RemoteFile::kDoneRecord),
            "hlo/ab/c1/abc123.neffd/model.done");
}

TEST(RemoteLayoutTest, BadUrlsNameTheFlag) {
  for (const char* url :
       {"", "http://bucket/p", "s3://", "s3://Bucket/p", "s3://ab/p",
        "s3://-bucket/p", "s3://bucket/a//b", "s3://bucket/../x",
        "s3://bucket/a/./b", "s3://bucket/a\nb"}) {
    absl::Status status = ParseRemoteUrl(url).status();
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << url;
    EXPECT_TRUE(absl::StartsWith(status.message(), "--remote=")) << status;
  }
}

}  // namespace
}  // namespace neffd::remote
