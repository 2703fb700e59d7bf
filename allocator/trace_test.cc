#include "allocator/trace.h"

#include <cstdio>
#include <fstream>
#include <string>

#include "allocator/testing/fake_segment_provider.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace neffd::allocator {
namespace {

using test_support::FakeSegmentProvider;
using ::testing::HasSubstr;

constexpr size_t kMiB = size_t{1} << 20;

TEST(ParseTrace, ReadsOperationsCommentsAndBlankLines) {
  absl::StatusOr<Trace> t = ParseTrace(
      "# a comment\n"
      "a x 1000\n"
      "\n"
      "a 0x7f00 4096\n"
      "  f x  \n"
      "e\n"
      "a x 12\r\n");  // ids may be reused once freed; CRLF is fine
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->ops.size(), 5u);
  EXPECT_EQ(t->num_slots, 2u);
  EXPECT_EQ(t->ops[0].kind, TraceOp::kAlloc);
  EXPECT_EQ(t->ops[0].bytes, 1000u);
  EXPECT_EQ(t->ops[2].kind, TraceOp::kFree);
  EXPECT_EQ(t->ops[2].slot, t->ops[0].slot);
  EXPECT_EQ(t->ops[3].kind, TraceOp::kEmptyCache);
  EXPECT_EQ(t->ops[4].slot, t->ops[0].slot);
}

TEST(ParseTrace, MalformedLinesNameTheLineNumber) {
  struct Case {
    const char* text;
    const char* want;
  };
  for (const Case& c : {
           Case{"a 1 10\nx 1\n", "line 2: unknown operation"},
           Case{"a 1\n", "line 1: expected 'a <id> <bytes>'"},
           Case{"a 1 1MB\n", "line 1: expected 'a <id> <bytes>'"},
           Case{"a 1 -5\n", "line 1:"},
           Case{"a 1 5 6\n", "line 1:"},
           Case{"# ok\nf 1\n", "line 2: free of an id that is not live"},
           Case{"a 1 5\nf 1\nf 1\n", "line 3: free of an id"},
           Case{"a 1 5\na 1 6\n",
                "line 2: id is already live (allocated on "
                "line 1)"},
           Case{"e now\n", "line 1: 'e' takes no fields"},
           Case{"f\n", "line 1: expected 'f <id>'"},
       }) {
    SCOPED_TRACE(c.text);
    absl::StatusOr<Trace> t = ParseTrace(c.text);
    ASSERT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(t.status().message()), HasSubstr(c.want));
  }
}

TEST(ReadTraceFile, MissingFileIsNotFoundAndErrorsNameThePath) {
  EXPECT_EQ(ReadTraceFile("/nonexistent/trace").status().code(),
            absl::StatusCode::kNotFound);
  const std::string path = ::testing::TempDir() + "/bad.trace";
  std::ofstream(path) << "a 1 10\nbogus\n";
  const absl::StatusOr<Trace> t = ReadTraceFile(path);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr(path + ": line 2"));
}

TEST(ReplayTrace, ReportsFinalAndPeakStatistics) {
  FakeSegmentProvider provider;
  auto pool = NeuronSegmentPool::Create(SegmentAllocatorConfig(), &provider);
  ASSERT_TRUE(pool.ok());
  absl::StatusOr<Trace> t = ParseTrace(
      "a 1 1000\n"
      "a 2 5000000\n"
      "f 1\n"
      "e\n"
      "a 3 30000000\n"
      "a 4 0\n"
      "f 4\n");
  ASSERT_TRUE(t.ok());
  const ReplayResult r = ReplayTrace(*t, **pool);
  EXPECT_EQ(r.ops, 7);
  EXPECT_EQ(r.failed_allocations, 0);
  EXPECT_GT(r.ops_per_second(), 0);
  const auto summary = ReplaySummary(r.stats);
  using Entry = std::pair<std::string, int64_t>;
  // 5000000 rounds to 5 MiB, 30000000 to 30 MiB; both share one 64 MiB
  // medium segment. The small segment was emptied by 'e'.
  EXPECT_THAT(summary,
              ::testing::ElementsAre(
                  Entry{"reserved_bytes", 64 * kMiB},
                  Entry{"allocated_bytes", 35 * kMiB},
                  Entry{"requested_bytes", 35000000},
                  Entry{"peak_reserved_bytes", 66 * kMiB},
                  Entry{"peak_allocated_bytes", 35 * kMiB},
                  Entry{"peak_requested_bytes", 35000000}, Entry{"segment", 1},
                  Entry{"num_alloc_retries", 0}, Entry{"num_ooms", 0},
                  Entry{"num_device_alloc", 2}, Entry{"num_device_free", 1}));
}

TEST(ReplayTrace, FailedAllocationsCountAsOomsAndTheReplayGoesOn) {
  FakeSegmentProvider provider(/*capacity=*/64 * kMiB);
  auto pool = NeuronSegmentPool::Create(SegmentAllocatorConfig(), &provider);
  ASSERT_TRUE(pool.ok());
  absl::StatusOr<Trace> t = ParseTrace(
      "a big 100000000\n"  // cannot fit
      "a small 100\n"
      "f big\n"  // skipped: it never existed
      "f small\n");
  ASSERT_TRUE(t.ok());
  const ReplayResult r = ReplayTrace(*t, **pool);
  EXPECT_EQ(r.failed_allocations, 1);
  EXPECT_EQ(r.stats.num_ooms, 1);
  EXPECT_EQ(r.stats.num_alloc_retries, 1);
  EXPECT_EQ(r.stats.allocated_bytes.all().current, 0);
  EXPECT_EQ(r.stats.allocation.all().allocated, 1);
}

}  // namespace
}  // namespace neffd::allocator
