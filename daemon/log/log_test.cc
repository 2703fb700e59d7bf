#include "daemon/log/log.h"

#include "gtest/gtest.h"

namespace neffd::log {
namespace {

TEST(Log, LogfmtLineWithQuotedValues) {
  Configure(2, false);
  std::string line = Format(Level::kInfo, "started",
                            {{"address", "unix:/run/neffd/neffd.sock"},
                             {"note", "two words"},
                             {"n", uint64_t{3}}});
  EXPECT_NE(line.find(" level=info event=started "
                      "address=unix:/run/neffd/neffd.sock "
                      "note=\"two words\" n=3"),
            std::string::npos)
      << line;
  EXPECT_EQ(line[4], '-') << "starts with a date: " << line;
}

TEST(Log, JournalFormHasPriorityPrefixAndNoTimestamp) {
  Configure(3, true);
  EXPECT_EQ(Format(Level::kError, "x", {}), "<3>level=error event=x");
  EXPECT_EQ(Format(Level::kWarning, "x", {}), "<4>level=warning event=x");
  EXPECT_EQ(Format(Level::kInfo, "x", {}), "<6>level=info event=x");
  EXPECT_EQ(Format(Level::kDebug, "x", {}), "<7>level=debug event=x");
}

TEST(Log, VerbosityFilters) {
  Configure(1, false);
  EXPECT_TRUE(Enabled(Level::kError));
  EXPECT_TRUE(Enabled(Level::kWarning));
  EXPECT_FALSE(Enabled(Level::kInfo));
  Configure(9, false);
  EXPECT_EQ(Verbosity(), 3);
  EXPECT_TRUE(Enabled(Level::kDebug));
}

}  // namespace
}  // namespace neffd::log
