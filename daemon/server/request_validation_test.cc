// The bounds of every CompileCache request field and the message that names
// the field when a bound is broken: what a client sees as INVALID_ARGUMENT.
#include "daemon/server/request_validation.h"

#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/entry_id.h"

namespace neffd {
namespace {

constexpr char kStaging[] = "/run/staging/lease1";

v1::EntryId Neff(const std::string& key) {
  return EntryKey::Parse("neff", "2.19.1", key)->ToProto();
}

// InvalidArgument whose message starts with `field` and contains `detail`.
void ExpectRefused(const absl::Status& status, const std::string& field,
                   const std::string& detail = "") {
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_TRUE(absl::StartsWith(status.message(), field + ":")) << status;
  EXPECT_TRUE(absl::StrContains(status.message(), detail)) << status;
}

TEST(ValidateLeaseIdTest, NonEmptyAndAtMost64Bytes) {
  EXPECT_TRUE(ValidateLeaseId("l").ok());
  EXPECT_TRUE(ValidateLeaseId(std::string(64, 'l')).ok());
  ExpectRefused(ValidateLeaseId(""), "lease_id", "is empty");
  ExpectRefused(ValidateLeaseId(std::string(65, 'l')), "lease_id",
                "longer than 64 bytes");
}

TEST(ValidateLockRequestTest, EntryAndHostBound) {
  RequestLimits limits;
  v1::LockRequest request;
  *request.mutable_id() = Neff("k1");
  request.mutable_holder()->set_host(std::string(limits.max_host_bytes, 'h'));
  absl::StatusOr<EntryKey> key = ValidateLockRequest(request, limits);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->Canonical(), EntryKey::Parse(Neff("k1"))->Canonical());

  request.mutable_holder()->set_host(
      std::string(limits.max_host_bytes + 1, 'h'));
  ExpectRefused(ValidateLockRequest(request, limits).status(), "holder.host",
                "longer than 256 bytes");

  request.mutable_holder()->clear_host();
  request.mutable_id()->set_key("");
  ExpectRefused(ValidateLockRequest(request, limits).status(), "id.key",
                "is empty");
  request.mutable_id()->set_key("../escape");
  EXPECT_TRUE(
      absl::IsInvalidArgument(ValidateLockRequest(request, limits).status()));
  *request.mutable_id() = Neff("k1");
  request.mutable_id()->set_namespace_("bogus");
  EXPECT_TRUE(
      absl::IsInvalidArgument(ValidateLockRequest(request, limits).status()));
}

class ValidatePublishRequestTest : public ::testing::Test {
 protected:
  ValidatePublishRequestTest() {
    limits_.max_entry_bytes = 1000;
    limits_.max_inline_bytes = 100;
    limits_.max_metadata_entries = 4;
    *request_.mutable_id() = Neff("k1");
    request_.set_lease_id("lease1");
    SetInline("abc");
  }

  void SetInline(const std::string& bytes) {
    request_.set_inline_bytes(bytes);
    request_.set_size(bytes.size());
    request_.set_sha256(Sha256Hex(bytes));
  }

  absl::Status Validate() {
    return ValidatePublishRequest(request_, limits_, kStaging).status();
  }

  RequestLimits limits_;
  v1::PublishRequest request_;
};

TEST_F(ValidatePublishRequestTest, AWellFormedInlinePublishPasses) {
  absl::StatusOr<EntryKey> key =
      ValidatePublishRequest(request_, limits_, kStaging);
  ASSERT_TRUE(key.ok()) << key.status();
  EXPECT_EQ(key->key(), "k1");
}

TEST_F(ValidatePublishRequestTest, LeaseIdIsRequired) {
  request_.clear_lease_id();
  ExpectRefused(Validate(), "lease_id", "is empty");
}

TEST_F(ValidatePublishRequestTest, Sha256IsSixtyFourLowercaseHexDigits) {
  request_.set_sha256(std::string(64, 'A'));
  ExpectRefused(Validate(), "sha256", "64 lowercase hex digits");
  request_.set_sha256(std::string(63, 'a'));
  ExpectRefused(Validate(), "sha256");
}

TEST_F(ValidatePublishRequestTest, Sha256MayBeLeftToTheDaemon) {
  request_.set_sha256("");
  EXPECT_TRUE(Validate().ok()) << Validate();
}

TEST_F(ValidatePublishRequestTest, SizeIsBoundedByMaxEntryBytes) {
  request_.set_staged_path(std::string(kStaging) + "/model.neff");
  request_.set_size(1000);
  EXPECT_TRUE(Validate().ok()) << Validate();
  request_.set_size(1001);
  ExpectRefused(Validate(), "size",
                "1001 bytes is over the limit of 1000 (--max_entry_bytes)");
}

TEST_F(ValidatePublishRequestTest, ContentMustBeSet) {
  request_.clear_content();
  ExpectRefused(Validate(), "content", "set staged_path or inline_bytes");
}

TEST_F(ValidatePublishRequestTest, InlineBytesAreBoundedAndMatchTheSize) {
  SetInline(std::string(100, 'x'));
  EXPECT_TRUE(Validate().ok()) << Validate();
  SetInline(std::string(101, 'x'));
  ExpectRefused(Validate(), "inline_bytes",
                "101 bytes is over the inline limit of 100; stage a file");
  SetInline("abc");
  request_.set_size(4);
  ExpectRefused(Validate(), "size",
                "inline_bytes has 3 bytes; the request "
                "says 4");
}

TEST_F(ValidatePublishRequestTest, MetadataEntriesAreBounded) {
  for (int i = 0; i < 4; ++i) {
    (*request_.mutable_metadata())[absl::StrCat("k", i)] = "v";
  }
  EXPECT_TRUE(Validate().ok()) << Validate();
  (*request_.mutable_metadata())["one_more"] = "v";
  ExpectRefused(Validate(), "metadata", "at most 4 entries");
}

TEST_F(ValidatePublishRequestTest, MetadataSizesAreBoundedAndNamed) {
  (*request_.mutable_metadata())["key_inputs"] =
      std::string(limits_.max_metadata_value_bytes, 'x');
  EXPECT_TRUE(Validate().ok()) << Validate();
  (*request_.mutable_metadata())["key_inputs"] += "x";
  ExpectRefused(Validate(), "metadata[key_inputs]", "over the limit of");
  request_.clear_metadata();
  (*request_.mutable_metadata())[std::string(limits_.max_metadata_key_bytes + 1,
                                             'k')] = "v";
  ExpectRefused(Validate(), "metadata", "keys are 1..");
  request_.clear_metadata();
  for (int i = 0; i < 4; ++i) {
    (*request_.mutable_metadata())[absl::StrCat("k", i)] =
        std::string(limits_.max_metadata_bytes / 4, 'v');
  }
  ExpectRefused(Validate(), "metadata", "bytes in all");
}

TEST_F(ValidatePublishRequestTest, StagedPathMustBeDirectlyInTheStagingDir) {
  request_.set_staged_path(std::string(kStaging) + "/model.neff");
  EXPECT_TRUE(Validate().ok()) << Validate();
  request_.set_staged_path(std::string(kStaging) + "/sub/model.neff");
  ExpectRefused(Validate(), "staged_path",
                "not a file directly inside the staging directory");
}

TEST(ValidateStagedPathTest, OnlyANamedFileDirectlyInside) {
  const std::string staging = kStaging;
  EXPECT_TRUE(ValidateStagedPath(staging, staging + "/model.neff").ok());
  for (const std::string& path :
       {staging + "/sub/model.neff", staging + "2/model.neff",
        std::string("/run/staging/model.neff"),
        std::string("relative/model.neff"), std::string(""), staging,
        staging + "/"}) {
    ExpectRefused(ValidateStagedPath(staging, path), "staged_path");
  }
  ExpectRefused(ValidateStagedPath(staging, staging + "/.."), "staged_path");
  ExpectRefused(ValidateStagedPath(staging, staging + "/."), "staged_path");
}

TEST(ValidateUnlockRequestTest, OutcomeIsAbandonedOrFailed) {
  RequestLimits limits;
  v1::UnlockRequest request;
  *request.mutable_id() = Neff("k1");
  request.set_lease_id("lease1");
  request.set_outcome(v1::UnlockRequest::ABANDONED);
  EXPECT_TRUE(ValidateUnlockRequest(request, limits).ok());
  request.set_outcome(v1::UnlockRequest::FAILED);
  EXPECT_TRUE(ValidateUnlockRequest(request, limits).ok());
  request.set_outcome(v1::UnlockRequest::OUTCOME_UNSPECIFIED);
  ExpectRefused(ValidateUnlockRequest(request, limits).status(), "outcome",
                "must be ABANDONED or FAILED");
  request.set_outcome(v1::UnlockRequest::FAILED);
  request.set_log(std::string(limits.max_log_bytes + 1, 'e'));
  ExpectRefused(ValidateUnlockRequest(request, limits).status(), "log",
                "over the limit of");
  request.clear_log();
  request.clear_lease_id();
  ExpectRefused(ValidateUnlockRequest(request, limits).status(), "lease_id",
                "is empty");
}

}  // namespace
}  // namespace neffd
