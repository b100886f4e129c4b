// Tests for task file parsing: both kinds, defaults, and errors that name
// the line and the field.
#include "core/eval/task_file.h"

#include <string>

#include "core/base/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quant {
namespace {

using ::testing::HasSubstr;

std::string ErrorOf(absl::string_view text, const TaskFileLimits& limits = {}) {
  absl::StatusOr<TaskFile> file = ParseTaskFile(text, limits);
  EXPECT_FALSE(file.ok()) << text;
  if (file.ok()) return "";
  EXPECT_EQ(file.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(file.status().message());
}

TEST(TaskFileTest, ParsesBothKindsWithDefaults) {
  const std::string text =
      "{\"prompt\": \"Tom had a dog.\", \"choices\": [\" It barked.\", \" It "
      "flew.\"], \"answer\": 0, \"id\": \"a\", \"task\": \"endings\"}\n"
      "\n"
      "  \n"
      "{\"prompt\": \"Once upon a\", \"target\": \" time\"}\n";
  absl::StatusOr<TaskFile> file = ParseTaskFile(text);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->sha256, Sha256Hex(text));
  ASSERT_EQ(file->items.size(), 2u);
  const TaskItem& choice = file->items[0];
  EXPECT_EQ(choice.kind, TaskKind::kMultipleChoice);
  EXPECT_EQ(choice.line, 1);
  EXPECT_EQ(choice.id, "a");
  EXPECT_EQ(choice.task, "endings");
  EXPECT_EQ(choice.prompt, "Tom had a dog.");
  EXPECT_THAT(choice.choices,
              ::testing::ElementsAre(" It barked.", " It flew."));
  EXPECT_EQ(choice.answer, 0);
  const TaskItem& generation = file->items[1];
  EXPECT_EQ(generation.kind, TaskKind::kGeneration);
  EXPECT_EQ(generation.line, 4);
  EXPECT_EQ(generation.id, "");
  EXPECT_EQ(generation.task, "default");
  EXPECT_EQ(generation.target, " time");
  EXPECT_EQ(TaskKindName(generation.kind), "generation");
}

TEST(TaskFileTest, ErrorsNameTheLineAndField) {
  const std::string good = "{\"prompt\": \"p\", \"target\": \"t\"}\n";
  EXPECT_EQ(ErrorOf(good + good +
                    "{\"prompt\": \"p\", \"choices\": [\"a\", \"b\"], "
                    "\"answer\": 3}"),
            "line 3: \"answer\" is 3 but there are 2 choices");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"p\", \"choices\": [\"a\", \"b\"], "
                    "\"answer\": -1}"),
            "line 1: \"answer\" is -1 but there are 2 choices");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"p\", \"choices\": [\"a\", \"b\"], "
                    "\"answer\": 1.5}"),
            "line 1: \"answer\" is not an integer");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"p\", \"choices\": [\"a\", \"b\"]}"),
            "line 1: \"answer\" is missing");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"p\", \"choices\": [\"a\"], \"answer\": 0}"),
            "line 1: \"choices\" has 1 entries; at least 2 are needed");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"p\", \"choices\": \"a\", \"answer\": 0}"),
            "line 1: \"choices\" is not an array");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"p\", \"choices\": [\"a\", 2], "
                    "\"answer\": 0}"),
            "line 1: \"choices\"[1] is not a string");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"p\", \"choices\": [\"a\", \"  \"], "
                    "\"answer\": 0}"),
            "line 1: \"choices\"[1] is empty");
  EXPECT_EQ(ErrorOf("\n{\"target\": \"t\"}"), "line 2: \"prompt\" is missing");
  EXPECT_EQ(ErrorOf("{\"prompt\": 4, \"target\": \"t\"}"),
            "line 1: \"prompt\" is not a string");
  EXPECT_EQ(ErrorOf("{\"prompt\": \" \", \"target\": \"t\"}"),
            "line 1: \"prompt\" is empty");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"p\", \"target\": \"\"}"),
            "line 1: \"target\" is empty");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"p\", \"target\": \"t\", \"id\": 7}"),
            "line 1: \"id\" is not a string");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"p\", \"target\": \"t\", \"task\": \"\"}"),
            "line 1: \"task\" is empty");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"p\"}"),
            "line 1: task has neither \"choices\" (multiple choice) nor "
            "\"target\" (generation)");
  EXPECT_THAT(ErrorOf("{\"prompt\": \"p\", \"target\": \"t\", \"choices\": "
                      "[\"a\", \"b\"], \"answer\": 0}"),
              HasSubstr("line 1: task has both \"choices\""));
  EXPECT_THAT(ErrorOf("{\"prompt\": \"p\", \"target\": \"t\", \"answer\": 0}"),
              HasSubstr("line 1: \"answer\" belongs to multiple choice"));
  EXPECT_THAT(ErrorOf(good + "{\"prompt\": \"p\", \"target\": \"t\", "
                             "\"label\": 1}"),
              HasSubstr("line 2: unknown member \"label\""));
  EXPECT_THAT(ErrorOf(good + "{\"prompt\": \"p\""),
              HasSubstr("line 2: invalid JSON: "));
  EXPECT_EQ(ErrorOf("[1, 2]"), "line 1: task is not an object");
  EXPECT_EQ(ErrorOf("{\"prompt\": \"p\", \"target\": \"t\", \"id\": \"x\"}\n"
                    "{\"prompt\": \"q\", \"target\": \"t\", \"id\": \"x\"}"),
            "line 2: \"id\" \"x\" repeats the one on line 1");
}

TEST(TaskFileTest, EmptyFilesAndLimits) {
  EXPECT_EQ(ErrorOf(""), "task file is empty: no task");
  EXPECT_EQ(ErrorOf("\n \n\t\n"), "task file is empty: no task");
  const std::string good = "{\"prompt\": \"p\", \"target\": \"t\"}\n";
  TaskFileLimits limits;
  limits.max_tasks = 2;
  EXPECT_EQ(ErrorOf(good + good + good, limits),
            "line 3: more than 2 tasks in the file");
  limits = TaskFileLimits();
  limits.max_bytes = 10;
  EXPECT_EQ(ErrorOf(good, limits),
            "task file has 31 bytes, over the limit of 10");
  limits = TaskFileLimits();
  limits.max_choices = 2;
  EXPECT_THAT(ErrorOf("{\"prompt\": \"p\", \"choices\": [\"a\", \"b\", "
                      "\"c\"], \"answer\": 0}",
                      limits),
              HasSubstr("line 1: \"choices\" has 3 entries, over the limit"));
}

TEST(TaskFileTest, LoadNamesThePath) {
  absl::StatusOr<TaskFile> file = LoadTaskFile("/nonexistent/tasks.jsonl");
  EXPECT_FALSE(file.ok());
  EXPECT_THAT(std::string(file.status().message()),
              HasSubstr("/nonexistent/tasks.jsonl"));
}

}  // namespace
}  // namespace quant
