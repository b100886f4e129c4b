// Tests for parsing calibration files.
#include "core/calib/calibration_file.h"

#include "core/base/sha256.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

TEST(CalibrationFileTest, JsonlTextAndIds) {
  const std::string bytes =
      "{\"text\": \"Once upon a time\"}\n\n{\"input_ids\": [1, 2, 3]}\n";
  auto file = ParseCalibrationFile(bytes);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->format, CalibrationFormat::kJsonl);
  EXPECT_EQ(file->sha256, Sha256Hex(bytes));
  ASSERT_EQ(file->documents.size(), 2u);
  EXPECT_EQ(file->documents[0].text, "Once upon a time");
  EXPECT_FALSE(file->documents[0].input_ids.has_value());
  EXPECT_EQ(*file->documents[1].input_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(file->documents[1].line, 3);
}

TEST(CalibrationFileTest, ConversationsKeepTheirLineAsWritten) {
  const std::string conversation =
      R"({"messages": [{"role": "user", "content": "Hi"}], "tools": []})";
  auto file = ParseCalibrationFile("{\"text\": \"a\"}\n" + conversation + "\n");
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_EQ(file->documents.size(), 2u);
  EXPECT_FALSE(file->documents[0].conversation.has_value());
  ASSERT_TRUE(file->documents[1].conversation.has_value());
  EXPECT_EQ(*file->documents[1].conversation, conversation);
  EXPECT_TRUE(file->documents[1].text.empty());
  EXPECT_EQ(file->documents[1].line, 2);
}

TEST(CalibrationFileTest, JsonlErrorsNameTheLine) {
  struct Case {
    std::string bytes;
    std::string message;
  };
  const Case cases[] = {
      {"{\"text\": \"a\"}\n{\"text\": \"b\"\n", "line 2: invalid JSON"},
      {"{\"text\": \"a\"}\n\n{\"txt\": \"b\"}\n",
       "line 3: document has none of \"text\", \"input_ids\" and "
       "\"messages\""},
      {"{\"messages\": []}", "line 1: \"messages\" is not a non-empty array"},
      {"{\"messages\": {\"role\": \"user\"}}", "not a non-empty array"},
      {"{\"text\": \"a\", \"messages\": [{}]}", "more than one"},
      {"{\"input_ids\": [1, -2]}",
       "line 1: \"input_ids\"[1] is not a "
       "non-negative integer"},
      {"{\"input_ids\": []}", "line 1: \"input_ids\" is not a non-empty array"},
      {"{\"text\": 5}", "line 1: \"text\" is not a string"},
      {"{\"text\": \" \\n\"}", "line 1: \"text\" is empty"},
      {"{\"text\": \"a\", \"input_ids\": [1]}", "more than one"},
      {"{\"text\": \"a\"}\n[1, 2]\n", "line 2: document is not an object"},
      {"{\"text\": \"a\", \"meta\": " + std::string(20000, '[') +
           std::string(20000, ']') + "}",
       "line 1: invalid JSON: nested deeper than 64 levels"},
  };
  for (const Case& c : cases) {
    auto file = ParseCalibrationFile(c.bytes);
    ASSERT_FALSE(file.ok()) << c.bytes;
    EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(file.status().message().find(c.message), std::string::npos)
        << file.status().message();
  }
}

TEST(CalibrationFileTest, PlainTextParagraphs) {
  auto file =
      ParseCalibrationFile("\n\nFirst line\nsecond line\n\n\n\r\nNext\r\n \n");
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->format, CalibrationFormat::kPlainText);
  ASSERT_EQ(file->documents.size(), 2u);
  EXPECT_EQ(file->documents[0].text, "First line\nsecond line");
  EXPECT_EQ(file->documents[0].line, 3);
  EXPECT_EQ(file->documents[1].text, "Next\n ");  // Spaces are content.
}

TEST(CalibrationFileTest, EmptySetIsAnError) {
  EXPECT_FALSE(ParseCalibrationFile("").ok());
  EXPECT_FALSE(ParseCalibrationFile("\n \n\t\n").ok());
}

TEST(CalibrationFileTest, TinyStoriesHasItsParagraphs) {
  const std::string path = testing::SharedPath("data/tinystories_val.txt");
  QUANT_REQUIRE_SHARED(path);
  auto file = LoadCalibrationFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->documents.size(), 4300u);  // As data/README.md states.
  auto digest = Sha256File(path);
  ASSERT_TRUE(digest.ok());
  EXPECT_EQ(file->sha256, *digest);
}

TEST(CalibrationFileTest, SizeLimitIsEnforced) {
  const std::string path = testing::SharedPath("data/tinystories_val.txt");
  QUANT_REQUIRE_SHARED(path);
  CalibrationFileLimits limits;
  limits.max_bytes = 1000;
  auto file = LoadCalibrationFile(path, limits);
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace quant
