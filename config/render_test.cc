#include "config/render.h"

#include <map>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "config/env.h"
#include "config/json_testing.h"
#include "gmock/gmock.h"
#include "google/protobuf/struct.pb.h"
#include "gtest/gtest.h"

namespace neffd::config {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

EnvSnapshot Snapshot(const std::map<std::string, std::string>& env) {
  SnapshotOptions options;
  options.product_name_path = "/nonexistent/product_name";
  options.user_name = "alice";
  options.uid = 1234;
  return EnvSnapshot::FromMap(env, options);
}

const google::protobuf::Value& Variable(const google::protobuf::Struct& root,
                                        const std::string& name,
                                        const std::string& field) {
  return VariableOf(root, name).fields().at(field);
}

TEST(RenderJson, TypedValuesOriginsAndWarnings) {
  EnvSnapshot snapshot =
      Snapshot({{"TORCH_NEURONX_LOG_LEVEL", "2"},
                {"TORCH_NEURONX_COMPILE_ONLY", "x"},
                {"TORCH_NEURONX_PROFILE_CAPTURE_NC", "2-3"}});
  absl::StatusOr<std::string> json = RenderJson(snapshot);
  ASSERT_TRUE(json.ok()) << json.status();
  google::protobuf::Struct root = ParseJson(*json);

  EXPECT_EQ(root.fields().at("variables").struct_value().fields_size(),
            static_cast<int>(Variables().size()));
  EXPECT_EQ(Variable(root, "TORCH_NEURONX_LOG_LEVEL", "value").number_value(),
            2);
  EXPECT_EQ(Variable(root, "TORCH_NEURONX_LOG_LEVEL", "origin").string_value(),
            "env");
  EXPECT_FALSE(
      Variable(root, "TORCH_NEURONX_COMPILE_ONLY", "value").bool_value());
  EXPECT_EQ(
      Variable(root, "TORCH_NEURONX_COMPILE_ONLY", "origin").string_value(),
      "invalid");
  EXPECT_EQ(
      Variable(root, "TORCH_NEURONX_NEFF_CACHE_DIR", "value").string_value(),
      "/tmp/neff_cache");
  const auto& cores =
      Variable(root, "TORCH_NEURONX_PROFILE_CAPTURE_NC", "value").list_value();
  ASSERT_EQ(cores.values_size(), 2);
  EXPECT_EQ(cores.values(0).number_value(), 2);
  EXPECT_EQ(cores.values(1).number_value(), 3);
  EXPECT_EQ(Variable(root, "TORCH_NEURONX_PROFILE_MODES", "value")
                .list_value()
                .values(1)
                .string_value(),
            "cpu_util");
  EXPECT_EQ(
      Variable(root, "NEURON_PLATFORM_TARGET_OVERRIDE", "value").kind_case(),
      google::protobuf::Value::kNullValue);
  EXPECT_THAT(Variable(root, "TORCHINDUCTOR_CACHE_DIR", "note").string_value(),
              HasSubstr("alice"));

  const auto& warnings = root.fields().at("warnings").list_value();
  ASSERT_EQ(warnings.values_size(), 1);
  EXPECT_THAT(warnings.values(0).string_value(),
              HasSubstr("TORCH_NEURONX_COMPILE_ONLY=\"x\""));
}

TEST(RenderJson, StableOutput) {
  EnvSnapshot snapshot = Snapshot({});
  EXPECT_EQ(*RenderJson(snapshot), *RenderJson(snapshot));
  std::string json = *RenderJson(snapshot);
  EXPECT_LT(json.find("\"COLLECTIVE_BUCKETSIZE_IN_MB\""),
            json.find("\"TORCH_NEURONX_LOG_LEVEL\""));
}

TEST(RenderTable, OneAlignedRowPerVariable) {
  EnvSnapshot snapshot = Snapshot({{"TORCH_NEURONX_LOG_LEVEL", "9"}});
  std::string table = RenderTable(snapshot);
  std::vector<absl::string_view> lines =
      absl::StrSplit(table, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), Variables().size() + 1);
  EXPECT_THAT(lines[0], HasSubstr("NAME"));
  size_t value_column = lines[0].find("VALUE");
  size_t origin_column = lines[0].find("ORIGIN");
  for (size_t i = 1; i < lines.size(); ++i) {
    const VarSpec& spec = Variables()[i - 1];
    EXPECT_TRUE(absl::StartsWith(lines[i], spec.name)) << lines[i];
    EXPECT_NE(lines[i][value_column], ' ') << lines[i];
    EXPECT_EQ(lines[i][value_column - 1], ' ') << lines[i];
    EXPECT_EQ(lines[i].substr(origin_column, 7).find(' '),
              absl::string_view::npos)
        << lines[i];
  }
  EXPECT_THAT(table, HasSubstr("TORCH_NEURONX_LOG_LEVEL "));
  EXPECT_THAT(table, HasSubstr("invalid"));
  EXPECT_THAT(table, Not(HasSubstr("warning")));
}

TEST(RenderExplain, DescriptionValueAndWarning) {
  EnvSnapshot snapshot = Snapshot({{"TORCH_NEURONX_LOG_LEVEL", "7"}});
  std::string text =
      RenderExplain(snapshot, *FindVariable("TORCH_NEURONX_LOG_LEVEL"));
  EXPECT_THAT(text, HasSubstr("TORCH_NEURONX_LOG_LEVEL (int)"));
  EXPECT_THAT(text, HasSubstr("value:      1 (invalid)"));
  EXPECT_THAT(text, HasSubstr("validation: plain decimal integer from 0 to 3"));
  EXPECT_THAT(text, HasSubstr("warning:    TORCH_NEURONX_LOG_LEVEL=\"7\""));
  EXPECT_THAT(text, HasSubstr("Log verbosity: `0` = ERROR"));
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::StartsWith(line, "  Log") || absl::StartsWith(line, "  INFO")) {
      EXPECT_LE(line.size(), 78u) << line;
    }
  }
}

TEST(RenderMarkdown, EveryVariableWithTypeDefaultValidationAndReaders) {
  std::string doc = RenderMarkdown();
  for (const VarSpec& spec : Variables()) {
    SCOPED_TRACE(spec.name);
    size_t row = doc.find(absl::StrCat("| `", spec.name, "` | "));
    ASSERT_NE(row, std::string::npos);
    std::string line = doc.substr(row, doc.find('\n', row) - row);
    EXPECT_THAT(line, HasSubstr(absl::StrCat("| ", TypeName(spec.type), " |")));
    EXPECT_THAT(line, HasSubstr(ValidationText(spec)));
    EXPECT_THAT(line, HasSubstr(ReadersText(spec.readers)));
  }
  EXPECT_THAT(doc, HasSubstr("| `TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT` | int "
                             "| `1200` | plain decimal integer >= 0 | daemon, "
                             "client |"));
  EXPECT_THAT(doc, HasSubstr("/tmp/torchinductor_<user name>/"));
  EXPECT_THAT(doc, Not(HasSubstr("alice")));
}

}  // namespace
}  // namespace neffd::config
