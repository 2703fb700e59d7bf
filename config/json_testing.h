// config/json_testing.h (tests only)
//
// Reads back what RenderJson / `neuronx-env --json` print.

#ifndef NEFFD_CONFIG_JSON_TESTING_H_
#define NEFFD_CONFIG_JSON_TESTING_H_

#include <string>

#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"

namespace neffd::config {

// The JSON document as a Struct; a test failure if it does not parse.
inline google::protobuf::Struct ParseJson(const std::string& json) {
  google::protobuf::Struct root;
  auto status = google::protobuf::util::JsonStringToMessage(json, &root);
  EXPECT_TRUE(status.ok()) << status.ToString() << "\n" << json;
  return root;
}

// {"value": ..., "origin": ...} of variable `name`; throws if absent.
inline const google::protobuf::Struct& VariableOf(
    const google::protobuf::Struct& root, const std::string& name) {
  return root.fields()
      .at("variables")
      .struct_value()
      .fields()
      .at(name)
      .struct_value();
}

}  // namespace neffd::config

#endif  // NEFFD_CONFIG_JSON_TESTING_H_
