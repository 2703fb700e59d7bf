// PUBLISHED means durable, as the kernel sees it (issue 18, part 3): a real
// neffd is traced with `strace -f -yy` (attached by pid) during one staged
// publish. The trace shows the artifact's data fsynced, then its rename to
// {key}.neff, the shard directory fsynced, model.done's data fsynced, its
// rename, and the records directory fsynced, and no response frame (HTTP/2
// HEADERS or DATA) sent on the unix socket between the first of those syncs
// and the last: the PUBLISHED response goes out after them. The transport's
// own frames (a BDP PING, a WINDOW_UPDATE) may go out at any time.
#include <signal.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/faults/wire.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

// One traced system call: its text (name and arguments, with -yy's fd
// paths) and the trace lines where it started and where it returned.
struct Call {
  std::string text;
  size_t started = 0;
  size_t returned = 0;
};

// The calls of an `strace -f -o` log in order of their start; a call split
// by another thread's ("<unfinished ...>" ... "<... resumed>") is joined.
std::vector<Call> ParseTrace(const std::string& log) {
  std::vector<Call> calls;
  std::map<std::string, size_t> pending;  // pid -> index in calls
  size_t line_number = 0;
  for (absl::string_view line : absl::StrSplit(log, '\n', absl::SkipEmpty())) {
    ++line_number;
    const size_t space = line.find(' ');
    if (space == absl::string_view::npos) continue;
    const std::string pid(line.substr(0, space));
    absl::string_view rest =
        absl::StripLeadingAsciiWhitespace(line.substr(space));
    if (absl::StartsWith(rest, "<... ")) {
      auto it = pending.find(pid);
      if (it == pending.end()) continue;
      calls[it->second].text += std::string(rest);
      calls[it->second].returned = line_number;
      pending.erase(it);
      continue;
    }
    calls.push_back({std::string(rest), line_number, line_number});
    if (absl::StrContains(rest, "<unfinished ...>")) {
      pending[pid] = calls.size() - 1;
    }
  }
  return calls;
}

bool IsSync(const Call& call) {
  return absl::StartsWith(call.text, "fsync(") ||
         absl::StartsWith(call.text, "fdatasync(");
}

bool IsSocketSend(const Call& call) {
  for (absl::string_view name : {"sendmsg(", "sendto(", "write(", "writev("}) {
    if (absl::StartsWith(call.text, name)) {
      return absl::StrContains(call.text.substr(0, call.text.find(',')),
                               "UNIX");
    }
  }
  return false;
}

// The bytes of a string strace printed with C escapes (\n, \", \ooo, \xNN)
// starting at `at`, just past its opening quote; nullopt if it does not end
// or strace cut it short ("..." after the closing quote).
std::optional<std::string> Unescape(const std::string& text, size_t& at) {
  static const std::map<char, char> kNamed = {
      {'n', '\n'}, {'t', '\t'}, {'r', '\r'}, {'v', '\v'},
      {'f', '\f'}, {'"', '"'},  {'\\', '\\'}};
  std::string bytes;
  while (at < text.size() && text[at] != '"') {
    if (text[at] != '\\') {
      bytes.push_back(text[at++]);
      continue;
    }
    if (++at >= text.size()) return std::nullopt;
    if (auto named = kNamed.find(text[at]); named != kNamed.end()) {
      bytes.push_back(named->second);
      ++at;
      continue;
    }
    int base = 8;
    size_t digits = 0;
    if (text[at] == 'x') {
      base = 16;
      ++at;
    }
    constexpr absl::string_view kDigits = "0123456789abcdef";
    int value = 0;
    while (digits < (base == 16 ? 2u : 3u) && at < text.size()) {
      const size_t digit = kDigits.find(absl::ascii_tolower(text[at]));
      if (digit == absl::string_view::npos || digit >= size_t(base)) break;
      value = value * base + static_cast<int>(digit);
      ++digits;
      ++at;
    }
    if (digits == 0) return std::nullopt;
    bytes.push_back(static_cast<char>(value));
  }
  if (at >= text.size() || text.compare(at + 1, 3, "...") == 0) {
    return std::nullopt;
  }
  ++at;
  return bytes;
}

// Whether a traced send may carry the response: an HTTP/2 HEADERS, DATA or
// CONTINUATION frame. A buffer strace cut short, or bytes that do not parse
// as whole frames, count as a response, so a doubt fails the test rather
// than hiding a send.
bool MayCarryResponse(const Call& call) {
  if (!absl::StartsWith(call.text, "sendmsg(")) return true;
  const std::string kIov = "iov_base=\"";
  std::string bytes;
  for (size_t at = call.text.find(kIov); at != std::string::npos;
       at = call.text.find(kIov, at)) {
    at += kIov.size();
    std::optional<std::string> iov = Unescape(call.text, at);
    if (!iov.has_value()) return true;
    bytes += *iov;
  }
  // A frame: 24-bit length, type, flags, 32-bit stream id, payload.
  constexpr int kData = 0, kHeaders = 1, kContinuation = 9;
  size_t at = 0;
  while (at + 9 <= bytes.size()) {
    const auto byte = [&](size_t i) {
      return static_cast<size_t>(static_cast<unsigned char>(bytes[at + i]));
    };
    const int type = static_cast<int>(byte(3));
    if (type == kData || type == kHeaders || type == kContinuation) {
      return true;
    }
    at += 9 + (byte(0) << 16 | byte(1) << 8 | byte(2));
  }
  return at != bytes.size() || bytes.empty();
}

TEST(PublishStraceTest, DataDoneAndDirectorySyncedBeforePublishedIsSent) {
  const std::string root = NewTempDir("publish_strace");
  DaemonProcess daemon(root);
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  auto stub = daemon.NewStub();
  const v1::Lease lease = GrantLease(*stub, "synced");

  const std::string trace = root + "/strace.log";
  Process strace({"/usr/bin/strace", "-f", "-yy", "-s", "4096", "-e",
                  "trace=fsync,fdatasync,rename,renameat,renameat2,sendmsg,"
                  "sendto,write,writev",
                  "-o", trace, "-p", absl::StrCat(daemon.process().pid())});
  ASSERT_TRUE(
      WaitUntil([&] { return absl::StrContains(strace.Stderr(), "attached"); },
                absl::Seconds(30)))
      << strace.Stderr();

  const std::string content(3 << 20, 'd');
  grpc::Status published = PublishStaged(*stub, lease, content);
  ASSERT_TRUE(published.ok()) << published.error_message();
  strace.Signal(SIGINT);  // detaches; the daemon goes on
  strace.Wait();
  EXPECT_TRUE(daemon.process().Running());

  const std::vector<Call> calls = ParseTrace(ReadFile(trace));
  auto find = [&](auto match, bool last = false) -> const Call* {
    const Call* found = nullptr;
    for (const Call& call : calls) {
      if (!match(call)) continue;
      found = &call;
      if (!last) break;
    }
    return found;
  };
  const Call* data_synced = find([](const Call& c) {
    return IsSync(c) && absl::StrContains(c.text, "sy/nc/.synced.neff.tmp.");
  });
  const Call* artifact_renamed = find([](const Call& c) {
    return absl::StrContains(c.text, "rename") &&
           absl::StrContains(c.text, "sy/nc/synced.neff\"");
  });
  const Call* shard_synced = find([](const Call& c) {
    return IsSync(c) && absl::StrContains(c.text, "/sy/nc>)");
  });
  const Call* done_synced = find([](const Call& c) {
    return IsSync(c) &&
           absl::StrContains(c.text, "synced.neffd/.model.done.tmp.");
  });
  const Call* done_renamed = find([](const Call& c) {
    return absl::StrContains(c.text, "rename") &&
           absl::StrContains(c.text, "synced.neffd/model.done\"");
  });
  const Call* dir_synced = find(
      [](const Call& c) {
        return IsSync(c) && absl::StrContains(c.text, "synced.neffd>)");
      },
      /*last=*/true);
  const std::string log = ReadFile(trace);
  ASSERT_NE(data_synced, nullptr) << log;
  ASSERT_NE(artifact_renamed, nullptr) << log;
  ASSERT_NE(shard_synced, nullptr) << log;
  ASSERT_NE(done_synced, nullptr) << log;
  ASSERT_NE(done_renamed, nullptr) << log;
  ASSERT_NE(dir_synced, nullptr) << log;
  EXPECT_LT(data_synced->returned, artifact_renamed->started);
  EXPECT_LT(artifact_renamed->returned, done_synced->started);
  EXPECT_LT(done_synced->returned, done_renamed->started);
  // The artifact's name is durable before model.done may name it.
  EXPECT_LT(artifact_renamed->returned, shard_synced->started);
  EXPECT_LT(shard_synced->returned, done_renamed->started);
  EXPECT_LT(done_renamed->returned, dir_synced->started);

  // No response frame goes out on the socket while the entry is being made
  // durable, and the response does go out after it.
  size_t sends_after = 0;
  for (const Call& call : calls) {
    if (!IsSocketSend(call) || !MayCarryResponse(call)) continue;
    EXPECT_FALSE(call.started > data_synced->started &&
                 call.started < dir_synced->returned)
        << "a response frame went out before the publish was durable: "
        << call.text;
    if (call.started > dir_synced->returned) ++sends_after;
  }
  EXPECT_GT(sends_after, 0u) << log;
  RecordProperty("traced_calls", static_cast<int>(calls.size()));
}

}  // namespace
}  // namespace neffd::test_support
