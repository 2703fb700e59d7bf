#include "daemon/s3/s3_xml.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace neffd::remote {
namespace {

TEST(S3XmlTest, ErrorDocument) {
  absl::StatusOr<S3ErrorDocument> error = ParseS3Error(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
      "<Message>Please reduce your request rate.</Message>"
      "<RequestId>1</RequestId></Error>");
  ASSERT_TRUE(error.ok()) << error.status();
  EXPECT_EQ(error->code, "SlowDown");
  EXPECT_EQ(error->message, "Please reduce your request rate.");
}

TEST(S3XmlTest, NonErrorDocumentIsNotFound) {
  EXPECT_TRUE(absl::IsNotFound(
      ParseS3Error("<CompleteMultipartUploadResult/>").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseS3Error("").status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ParseS3Error("<Error>").status()));
}

TEST(S3XmlTest, ListWithNamespaceAndContinuation) {
  absl::StatusOr<ListObjectsPage> page = ParseListObjectsV2(
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
      "<IsTruncated>true</IsTruncated>"
      "<Contents><Key>a/b&amp;c</Key><Size>12</Size>"
      "<ETag>&quot;e1&quot;</ETag></Contents>"
      "<Contents><Key>a/d</Key><Size>0</Size></Contents>"
      "<NextContinuationToken>tok/+=</NextContinuationToken>"
      "</ListBucketResult>");
  ASSERT_TRUE(page.ok()) << page.status();
  ASSERT_EQ(page->objects.size(), 2u);
  EXPECT_EQ(page->objects[0].key, "a/b&c");
  EXPECT_EQ(page->objects[0].size, 12u);
  EXPECT_EQ(page->objects[0].etag, "\"e1\"");
  EXPECT_EQ(page->next_continuation_token, "tok/+=");
}

TEST(S3XmlTest, MalformedListsNameTheProblem) {
  absl::Status no_size = ParseListObjectsV2(
                             "<ListBucketResult><Contents><Key>k</Key>"
                             "</Contents></ListBucketResult>")
                             .status();
  absl::Status no_token = ParseListObjectsV2(
                              "<ListBucketResult><IsTruncated>true</"
                              "IsTruncated></ListBucketResult>")
                              .status();
  absl::Status wrong_root = ParseListObjectsV2("<Error/>").status();

  EXPECT_TRUE(absl::StrContains(no_size.message(), "<Size>")) << no_size;
  EXPECT_TRUE(absl::StrContains(no_token.message(), "NextContinuationToken"));
  EXPECT_EQ(wrong_root.message(),
            "expected a <ListBucketResult> document, got <Error>");
}

TEST(S3XmlTest, UploadId) {
  EXPECT_EQ(*ParseUploadId("<InitiateMultipartUploadResult><Bucket>b</Bucket>"
                           "<UploadId>u-1</UploadId>"
                           "</InitiateMultipartUploadResult>"),
            "u-1");
  EXPECT_FALSE(ParseUploadId("<InitiateMultipartUploadResult/>").ok());
}

TEST(S3XmlTest, DeepNestingIsRejected) {
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "<a>";
  for (int i = 0; i < 100; ++i) deep += "</a>";
  EXPECT_TRUE(absl::StrContains(ParseS3Error(deep).status().message(),
                                "nested deeper"));
}

TEST(S3XmlTest, CompleteBodyEscapesETags) {
  EXPECT_EQ(CompleteMultipartUploadXml({{1, "\"a\""}, {2, "b<"}}),
            "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
            "<ETag>&quot;a&quot;</ETag></Part><Part><PartNumber>2</PartNumber>"
            "<ETag>b&lt;</ETag></Part></CompleteMultipartUpload>");
  // What we write, expat reads back.
  EXPECT_TRUE(absl::IsNotFound(
      ParseS3Error(CompleteMultipartUploadXml({{1, "&\"<>"}})).status()));
}

}  // namespace
}  // namespace neffd::remote
