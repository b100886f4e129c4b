// json_fields: required and optional fields, null as absent, and errors
// that name the JSON path and the type found.
#include "core/base/json_fields.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quant::json_fields {
namespace {

using ::testing::HasSubstr;

const Json kObject = Json::parse(R"({
  "name": "bpe", "count": 3, "flag": true, "items": ["a", "b"],
  "inner": {"x": 1}, "nothing": null, "mixed": ["a", 2]
})");

TEST(JsonFieldsTest, RequiredFieldsReadTheirValues) {
  EXPECT_EQ(*GetString(kObject, "name", "model"), "bpe");
  EXPECT_EQ(*GetInt(kObject, "count", "model"), 3);
  EXPECT_EQ((*GetArray(kObject, "items", "model"))->size(), 2u);
  EXPECT_EQ((**GetObject(kObject, "inner", "model"))["x"], 1);
}

TEST(JsonFieldsTest, MissingOrNullRequiredFieldsAreNamed) {
  for (const char* key : {"absent", "nothing"}) {
    SCOPED_TRACE(key);
    const std::string path = absl::StrCat("model.", key, ": missing");
    EXPECT_EQ(GetString(kObject, key, "model").status().message(), path);
    EXPECT_EQ(GetInt(kObject, key, "model").status().message(), path);
    EXPECT_EQ(GetArray(kObject, key, "model").status().message(), path);
    EXPECT_EQ(GetObject(kObject, key, "model").status().message(), path);
  }
}

TEST(JsonFieldsTest, WrongTypesNameTheExpectedAndTheFoundType) {
  EXPECT_EQ(GetString(kObject, "count", "").status().message(),
            "count: expected a string, got number");
  EXPECT_EQ(GetInt(kObject, "name", "m").status().message(),
            "m.name: expected an integer, got string");
  EXPECT_EQ(GetArray(kObject, "inner", "m").status().message(),
            "m.inner: expected an array, got object");
  EXPECT_EQ(GetObject(kObject, "items", "m").status().message(),
            "m.items: expected an object, got array");
  EXPECT_EQ(GetBoolOr(kObject, "count", false, "m").status().message(),
            "m.count: expected true or false, got number");
  EXPECT_EQ(GetStringArrayOr(kObject, "mixed", "m").status().message(),
            "m.mixed[1]: expected a string, got number");
  EXPECT_EQ(GetStringArrayOr(kObject, "name", "m").status().message(),
            "m.name: expected an array, got string");
}

TEST(JsonFieldsTest, OptionalFieldsFallBackOnlyWhenAbsentOrNull) {
  EXPECT_EQ(*GetIntOr(kObject, "absent", 7, ""), 7);
  EXPECT_EQ(*GetIntOr(kObject, "nothing", 7, ""), 7);
  EXPECT_EQ(*GetIntOr(kObject, "count", 7, ""), 3);
  EXPECT_FALSE(GetIntOr(kObject, "name", 7, "").ok());
  EXPECT_TRUE(*GetBoolOr(kObject, "flag", false, ""));
  EXPECT_FALSE(*GetBoolOr(kObject, "absent", false, ""));
  EXPECT_EQ(*GetStringOr(kObject, "absent", "dflt", ""), "dflt");
  EXPECT_EQ(*GetStringOr(kObject, "name", "dflt", ""), "bpe");
  EXPECT_THAT(GetStringOr(kObject, "inner", "", "m").status().message(),
              HasSubstr("expected a string, got object"));
  EXPECT_TRUE(GetStringArrayOr(kObject, "absent", "")->empty());
  EXPECT_THAT(*GetStringArrayOr(kObject, "items", ""),
              ::testing::ElementsAre("a", "b"));
}

}  // namespace
}  // namespace quant::json_fields
