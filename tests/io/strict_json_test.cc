// Tests for ParseJsonStrict: duplicates, nesting, syntax errors, values.
#include "core/base/strict_json.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

TEST(StrictJsonTest, ParsesNestedValuesLikeNlohmann) {
  const std::string text =
      R"({"a": [1, -2, 3.5, "x", true, null, {"b": {}}], "c": {"d": []}})";
  absl::StatusOr<nlohmann::json> parsed = ParseJsonStrict(text, "test");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, nlohmann::json::parse(text));
  EXPECT_TRUE((*parsed)["a"][0].is_number_unsigned());
  EXPECT_TRUE((*parsed)["a"][1].is_number_integer());
}

TEST(StrictJsonTest, RejectsDuplicateTopLevelKey) {
  absl::StatusOr<nlohmann::json> parsed =
      ParseJsonStrict(R"({"a": 1, "b": 2, "a": 3})", "index");
  ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(parsed.status().message(), HasSubstr("index"));
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("duplicate key \"a\" in the top-level object"));
}

TEST(StrictJsonTest, RejectsDuplicateNestedKeyNamingItsObject) {
  absl::StatusOr<nlohmann::json> parsed =
      ParseJsonStrict(R"({"outer": {"k": 1, "k": 1}})", "x");
  EXPECT_THAT(parsed.status().message(),
              HasSubstr("duplicate key \"k\" in object \"outer\""));
}

TEST(StrictJsonTest, SameKeyInSiblingObjectsIsFine) {
  EXPECT_TRUE(ParseJsonStrict(R"([{"k": 1}, {"k": 2}])", "x").ok());
  EXPECT_TRUE(ParseJsonStrict(R"({"a": {"k": 1}, "b": {"k": 2}})", "x").ok());
}

TEST(StrictJsonTest, RejectsDeepNestingAtTheLimit) {
  StrictJsonOptions options;
  options.max_depth = 4;
  EXPECT_TRUE(ParseJsonStrict("[[[[]]]]", "x", options).ok());
  absl::StatusOr<nlohmann::json> parsed =
      ParseJsonStrict("[[[[[]]]]]", "x", options);
  EXPECT_THAT(parsed.status().message(), HasSubstr("nested deeper than 4"));
}

TEST(StrictJsonTest, SyntaxErrorSaysWhere) {
  absl::StatusOr<nlohmann::json> parsed = ParseJsonStrict("{\"a\": }", "cfg");
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("cfg is not valid JSON"));
  EXPECT_THAT(parsed.status().message(), HasSubstr("column 7"));
  EXPECT_FALSE(ParseJsonStrict("", "x").ok());
  EXPECT_FALSE(ParseJsonStrict("{} {}", "x").ok());
}

// The non-failing form the shape-checking readers use: the same bounds, a
// discarded value for anything that breaks them.
TEST(StrictJsonTest, OrDiscardedBoundsNestingAndKeepsTheLastDuplicate) {
  const nlohmann::json ok = ParseJsonOrDiscarded(R"({"a": 1, "a": 2})");
  ASSERT_FALSE(ok.is_discarded());
  EXPECT_EQ(ok["a"], 2);  // As Python reads it.
  EXPECT_TRUE(ParseJsonOrDiscarded("{\"a\": }").is_discarded());
  EXPECT_TRUE(ParseJsonOrDiscarded("").is_discarded());
  // 100,000 levels: nlohmann's own parser builds it (and a recursive walk
  // of it can overflow the stack); this refuses it.
  const std::string deep =
      std::string(100'000, '[') + std::string(100'000, ']');
  EXPECT_TRUE(ParseJsonOrDiscarded(deep).is_discarded());
  StrictJsonOptions strict;
  EXPECT_TRUE(
      ParseJsonOrDiscarded(R"({"a": 1, "a": 2})", strict).is_discarded());
}

}  // namespace
}  // namespace quant
