// daemon/s3/s3_xml.h
//
// The XML of S3's REST API that the S3 client reads and writes: error
// documents, InitiateMultipartUploadResult, ListBucketResult (ListObjectsV2)
// and the CompleteMultipartUpload request. Parsing is expat's; this file
// only picks fields out of the parsed tree. Element names are matched
// without their namespace (S3 answers in the 2006-03-01 namespace, s3rver
// in another spelling of it).
//
// Every parser returns InvalidArgument naming the document and the missing
// or malformed element when the input is not what S3 sends.
//
// Thread-safe (pure functions).
#ifndef NEFFD_DAEMON_S3_S3_XML_H_
#define NEFFD_DAEMON_S3_S3_XML_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace neffd::remote {

// <Error><Code>NoSuchKey</Code><Message>...</Message></Error>
struct S3ErrorDocument {
  std::string code;
  std::string message;
};

// NotFound if `xml` is a well-formed document that is not an <Error>
// (CompleteMultipartUpload can answer 200 with either).
absl::StatusOr<S3ErrorDocument> ParseS3Error(absl::string_view xml);

// The <UploadId> of an InitiateMultipartUploadResult.
absl::StatusOr<std::string> ParseUploadId(absl::string_view xml);

struct ListedObject {
  std::string key;
  uint64_t size = 0;
  std::string etag;
};

struct ListObjectsPage {
  std::vector<ListedObject> objects;
  // Set when the listing goes on; pass it as the next request's
  // continuation-token.
  std::string next_continuation_token;
};

absl::StatusOr<ListObjectsPage> ParseListObjectsV2(absl::string_view xml);

struct CompletedPart {
  int part_number = 0;
  std::string etag;  // as UploadPart's ETag header gave it, quotes included
};

// The body of a CompleteMultipartUpload request.
std::string CompleteMultipartUploadXml(const std::vector<CompletedPart>& parts);

}  // namespace neffd::remote

#endif  // NEFFD_DAEMON_S3_S3_XML_H_
