// Task files for the task gates (gates.tasks): JSONL, one task a line.
//
//   multiple choice: {"prompt": str, "choices": [str, ...], "answer": int}
//     at least 2 choices, none blank; "answer" indexes them. Each choice is
//     appended to the prompt as written, so it usually starts with a space
//     (" and they went home.").
//   generation:      {"prompt": str, "target": str}
//     the model's greedy continuation of the prompt must equal the target
//     (both stripped of surrounding whitespace).
//
// Either kind may carry "id" (a string, unique in the file) and "task" (a
// string naming the task group its accuracy is reported under; "default"
// when absent). Any other member is an error, as is a blank prompt. Errors
// name the line and field: `line 7: "answer" is 3 but there are 2 choices`.
// A file's identity is the sha256 of its bytes.
#ifndef QUANT_CORE_EVAL_TASK_FILE_H_
#define QUANT_CORE_EVAL_TASK_FILE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/file_system.h"

namespace quant {

enum class TaskKind { kMultipleChoice, kGeneration };

// "multiple_choice" or "generation", as the JSON results write it.
absl::string_view TaskKindName(TaskKind kind);

struct TaskItem {
  TaskKind kind = TaskKind::kMultipleChoice;
  std::string id;                // "" when the line has none.
  std::string task = "default";  // The task group.
  std::string prompt;
  std::vector<std::string> choices;  // Multiple choice only.
  int answer = -1;                   // Multiple choice only.
  std::string target;                // Generation only.
  int line = 0;                      // 1-based line of the task.
};

struct TaskFile {
  std::string sha256;  // Of the file's bytes.
  std::vector<TaskItem> items;
};

struct TaskFileLimits {
  size_t max_bytes = size_t{64} << 20;
  int max_tasks = 100000;
  int max_choices = 64;  // Per multiple-choice task.
};

// Parses file contents (see the top of this file). Blank lines are skipped;
// a file with no task is an error, as is one with more than
// limits.max_tasks tasks or more than limits.max_bytes bytes.
absl::StatusOr<TaskFile> ParseTaskFile(absl::string_view bytes,
                                       const TaskFileLimits& limits = {});

// Reads and parses `path` through `fs`; errors start with the path.
absl::StatusOr<TaskFile> LoadTaskFile(const std::string& path,
                                      const TaskFileLimits& limits = {},
                                      FileSystem* fs = FileSystem::Default());

}  // namespace quant

#endif  // QUANT_CORE_EVAL_TASK_FILE_H_
