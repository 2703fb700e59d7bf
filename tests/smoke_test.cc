#include <openssl/sha.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "rocksdb/db.h"

TEST(Smoke, Links) {
  neffd::v1::EntryId id;
  id.set_key("abc");
  absl::StatusOr<int> v = 3;
  rocksdb::Options o;
  unsigned char md[32];
  SHA256(reinterpret_cast<const unsigned char*>("x"), 1, md);
  EXPECT_EQ(absl::StrCat(id.key(), *v), "abc3");
}
