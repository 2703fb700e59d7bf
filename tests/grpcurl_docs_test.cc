// The grpcurl commands in docs/OPERATIONS.md, run against a real neffd by
// tests/grpcurl.py (a client that knows only the reflection proto and learns
// everything else from the server), must give the answers the doc shows.
// Text answers (list, describe) must match exactly; JSON answers must have
// the same fields, and the same values wherever the doc's value has no digit
// and no '/' (enum names, booleans, names), since counts, times and paths
// vary per run.
#include <algorithm>
#include <cctype>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

struct Example {
  std::vector<std::string> argv;  // after "grpcurl"
  std::string output;
};

// Splits a shell command line: spaces separate, '...' quotes.
std::vector<std::string> ShellWords(absl::string_view line) {
  std::vector<std::string> words;
  std::string word;
  bool quoted = false, any = false;
  for (char c : line) {
    if (c == '\'') {
      quoted = !quoted;
      any = true;
    } else if (c == ' ' && !quoted) {
      if (any) words.push_back(word);
      word.clear();
      any = false;
    } else {
      word.push_back(c);
      any = true;
    }
  }
  if (any) words.push_back(word);
  return words;
}

// Every ```console block of the doc that starts with "$ grpcurl".
std::vector<Example> GrpcurlExamples(const std::string& doc) {
  std::vector<Example> examples;
  std::vector<std::string> lines = absl::StrSplit(doc, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i] != "```console" || i + 1 >= lines.size() ||
        !absl::StartsWith(lines[i + 1], "$ grpcurl ")) {
      continue;
    }
    Example example;
    example.argv = ShellWords(lines[i + 1].substr(strlen("$ grpcurl ")));
    for (i += 2; i < lines.size() && lines[i] != "```"; ++i) {
      absl::StrAppend(&example.output, lines[i], "\n");
    }
    examples.push_back(std::move(example));
  }
  return examples;
}

// "key": value, from a line of grpcurl's JSON, or {"", ""}.
std::pair<std::string, std::string> KeyValue(absl::string_view line) {
  line = absl::StripAsciiWhitespace(line);
  if (!absl::StartsWith(line, "\"")) return {"", ""};
  const size_t colon = line.find("\": ");
  if (colon == absl::string_view::npos) return {"", ""};
  std::string value(line.substr(colon + 3));
  if (absl::EndsWith(value, ",")) value.pop_back();
  return {std::string(line.substr(0, colon + 1)), value};
}

void ExpectSameAnswer(const Example& example, const std::string& actual) {
  const std::string what = absl::StrJoin(example.argv, " ");
  if (!absl::StartsWith(example.output, "{")) {
    EXPECT_EQ(actual, example.output) << what;
    return;
  }
  std::vector<std::pair<std::string, std::string>> got;
  for (absl::string_view l : absl::StrSplit(actual, '\n')) {
    got.push_back(KeyValue(l));
  }
  for (absl::string_view l : absl::StrSplit(example.output, '\n')) {
    auto [key, value] = KeyValue(l);
    if (key.empty()) continue;
    const bool exact =
        std::none_of(value.begin(), value.end(),
                     [](char c) { return std::isdigit(c) || c == '/'; }) &&
        !absl::StartsWith(value, "{") && !absl::StartsWith(value, "[");
    bool found = false;
    for (const auto& [k, v] : got) {
      if (k == key && (!exact || v == value)) found = true;
    }
    EXPECT_TRUE(found) << what << ": no " << key << ": " << value << " in\n"
                       << actual;
  }
}

TEST(GrpcurlDocsTest, EveryDocumentedCommandGivesTheAnswerShown) {
  const std::string doc = ReadFile(Runfile("docs/OPERATIONS.md"));
  const std::vector<Example> examples = GrpcurlExamples(doc);
  ASSERT_GE(examples.size(), 8u) << "no grpcurl examples found";

  const std::string root = NewTempDir("grpcurl");
  DaemonProcess daemon(root);
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  // The entry the doc's Lookup finds.
  WriteFile(root + "/model.neff", "NEFF");
  CommandResult put =
      RunCommand({Runfile("client/neffctl"), "--address=" + daemon.address(),
                  "--compiler_version=2.19.8089.0", "put", "neff",
                  "3f9c2a7be41d05c8", root + "/model.neff"});
  ASSERT_EQ(put.exit_code, 0) << put.err;
  // The recorded compile failure the doc's statistics count.
  auto stub = daemon.NewStub();
  v1::LockRequest lock;
  lock.mutable_id()->set_namespace_("neff");
  lock.mutable_id()->set_compiler_version("2.19.8089.0");
  lock.mutable_id()->set_key("c0ffee12");
  v1::LockResponse granted;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->Lock(&context, lock, &granted).ok());
  }
  v1::UnlockRequest unlock;
  unlock.set_lease_id(granted.lease().lease_id());
  *unlock.mutable_id() = lock.id();
  unlock.set_outcome(v1::UnlockRequest::FAILED);
  unlock.set_log("neuronx-cc: error: Unsupported operator");
  v1::UnlockResponse unlocked;
  grpc::ClientContext context;
  ASSERT_TRUE(stub->Unlock(&context, unlock, &unlocked).ok());

  for (const Example& example : examples) {
    std::vector<std::string> argv = {"/usr/bin/python3",
                                     Runfile("tests/grpcurl.py")};
    for (const std::string& word : example.argv) {
      argv.push_back(absl::StrReplaceAll(
          word, {{"/run/neffd/neffd.sock", daemon.socket_path()},
                 {"/run/neffd/admin.sock", daemon.admin_address().substr(5)}}));
    }
    CommandResult r = RunCommand(argv);
    EXPECT_EQ(r.err, "") << absl::StrJoin(example.argv, " ");
    ExpectSameAnswer(example, r.out);
  }
}

}  // namespace
}  // namespace neffd::test_support
