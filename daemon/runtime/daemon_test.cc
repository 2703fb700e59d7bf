#include "daemon/runtime/daemon.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace neffd {
namespace {

TEST(ValidateAddressTest, UnixSocketsAndLoopbackOnly) {
  EXPECT_TRUE(ValidateAddress("unix:/run/neffd/neffd.sock").ok());
  EXPECT_TRUE(ValidateAddress("127.0.0.1:5555").ok());
  EXPECT_TRUE(ValidateAddress("localhost:0").ok());
  EXPECT_TRUE(ValidateAddress("[::1]:5555").ok());
  absl::Status wide = ValidateAddress("0.0.0.0:5555");
  EXPECT_TRUE(absl::IsInvalidArgument(wide));
  EXPECT_TRUE(absl::StrContains(wide.message(), "loopback"));
  EXPECT_FALSE(ValidateAddress("10.1.2.3:80").ok());
  EXPECT_FALSE(ValidateAddress("unix:relative.sock").ok());
  EXPECT_FALSE(ValidateAddress("localhost:99999").ok());
  EXPECT_FALSE(ValidateAddress("nonsense").ok());
}

}  // namespace
}  // namespace neffd
