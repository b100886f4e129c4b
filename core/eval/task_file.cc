// Parsing task files (JSONL of multiple-choice and generation tasks).
#include "core/eval/task_file.h"

#include <cstdint>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace {

using nlohmann::json;

absl::Status LineError(int line, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", problem));
}

bool IsBlank(absl::string_view text) {
  return absl::StripAsciiWhitespace(text).empty();
}

bool IsKnownMember(absl::string_view key) {
  return key == "prompt" || key == "choices" || key == "answer" ||
         key == "target" || key == "id" || key == "task";
}

// The string member `key`, or an error naming it. `allow_blank`: whether
// whitespace alone is a valid value.
absl::StatusOr<std::string> StringMember(const json& object,
                                         absl::string_view key, int line,
                                         bool allow_blank) {
  const auto it = object.find(std::string(key));
  if (it == object.end()) {
    return LineError(line, absl::StrCat("\"", key, "\" is missing"));
  }
  if (!it->is_string()) {
    return LineError(line, absl::StrCat("\"", key, "\" is not a string"));
  }
  std::string value = it->get<std::string>();
  if (!allow_blank && IsBlank(value)) {
    return LineError(line, absl::StrCat("\"", key, "\" is empty"));
  }
  return value;
}

absl::Status ParseMultipleChoice(const json& object, int line,
                                 const TaskFileLimits& limits, TaskItem* item) {
  item->kind = TaskKind::kMultipleChoice;
  const json& choices = object.at("choices");
  if (!choices.is_array()) {
    return LineError(line, "\"choices\" is not an array");
  }
  if (choices.size() < 2) {
    return LineError(line, absl::StrCat("\"choices\" has ", choices.size(),
                                        " entries; at least 2 are needed"));
  }
  if (choices.size() > static_cast<size_t>(limits.max_choices)) {
    return LineError(
        line, absl::StrCat("\"choices\" has ", choices.size(),
                           " entries, over the limit of ", limits.max_choices));
  }
  for (size_t i = 0; i < choices.size(); ++i) {
    if (!choices[i].is_string()) {
      return LineError(line,
                       absl::StrCat("\"choices\"[", i, "] is not a string"));
    }
    std::string choice = choices[i].get<std::string>();
    if (IsBlank(choice)) {
      return LineError(line, absl::StrCat("\"choices\"[", i, "] is empty"));
    }
    item->choices.push_back(std::move(choice));
  }
  const auto answer = object.find("answer");
  if (answer == object.end()) {
    return LineError(line, "\"answer\" is missing");
  }
  if (!answer->is_number_integer()) {
    return LineError(line, "\"answer\" is not an integer");
  }
  const int64_t index = answer->get<int64_t>();
  if (index < 0 || index >= static_cast<int64_t>(choices.size())) {
    return LineError(line,
                     absl::StrCat("\"answer\" is ", index, " but there are ",
                                  choices.size(), " choices"));
  }
  item->answer = static_cast<int>(index);
  return absl::OkStatus();
}

absl::StatusOr<TaskItem> ParseTaskLine(absl::string_view text, int line,
                                       const TaskFileLimits& limits) {
  absl::StatusOr<json> parsed =
      ParseJsonFile(text, "invalid JSON", PythonJsonOptions());
  if (!parsed.ok()) {
    // "invalid JSON: not valid JSON: ..." reads badly; keep the problem.
    absl::string_view problem = parsed.status().message();
    absl::ConsumePrefix(&problem, "invalid JSON: not valid JSON: ");
    return LineError(line, absl::StrCat("invalid JSON: ", problem));
  }
  const json object = *std::move(parsed);
  if (!object.is_object()) return LineError(line, "task is not an object");
  for (const auto& member : object.items()) {
    if (!IsKnownMember(member.key())) {
      return LineError(line, absl::StrCat("unknown member \"", member.key(),
                                          "\" (expected prompt, choices, "
                                          "answer, target, id, task)"));
    }
  }
  TaskItem item;
  item.line = line;
  QUANT_ASSIGN_OR_RETURN(item.prompt, StringMember(object, "prompt", line,
                                                   /*allow_blank=*/false));
  if (object.contains("id")) {
    QUANT_ASSIGN_OR_RETURN(item.id, StringMember(object, "id", line,
                                                 /*allow_blank=*/false));
  }
  if (object.contains("task")) {
    QUANT_ASSIGN_OR_RETURN(item.task, StringMember(object, "task", line,
                                                   /*allow_blank=*/false));
  }
  const bool has_choices = object.contains("choices");
  const bool has_target = object.contains("target");
  if (has_choices && has_target) {
    return LineError(line,
                     "task has both \"choices\" (multiple choice) and "
                     "\"target\" (generation)");
  }
  if (has_choices) {
    QUANT_RETURN_IF_ERROR(ParseMultipleChoice(object, line, limits, &item));
    return item;
  }
  if (has_target) {
    if (object.contains("answer")) {
      return LineError(line,
                       "\"answer\" belongs to multiple choice, but the task "
                       "has \"target\" (generation)");
    }
    item.kind = TaskKind::kGeneration;
    QUANT_ASSIGN_OR_RETURN(item.target, StringMember(object, "target", line,
                                                     /*allow_blank=*/false));
    return item;
  }
  return LineError(line,
                   "task has neither \"choices\" (multiple choice) nor "
                   "\"target\" (generation)");
}

}  // namespace

absl::string_view TaskKindName(TaskKind kind) {
  return kind == TaskKind::kMultipleChoice ? "multiple_choice" : "generation";
}

absl::StatusOr<TaskFile> ParseTaskFile(absl::string_view bytes,
                                       const TaskFileLimits& limits) {
  if (bytes.size() > limits.max_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("task file has ", bytes.size(),
                     " bytes, over the limit of ", limits.max_bytes));
  }
  TaskFile file;
  file.sha256 = Sha256Hex(bytes);
  // Line of each id, so a repeat names both lines.
  absl::flat_hash_map<std::string, int> id_lines;
  const std::vector<absl::string_view> lines = absl::StrSplit(bytes, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    if (IsBlank(lines[i])) continue;
    const int line = static_cast<int>(i + 1);
    if (file.items.size() >= static_cast<size_t>(limits.max_tasks)) {
      return LineError(line, absl::StrCat("more than ", limits.max_tasks,
                                          " tasks in the file"));
    }
    QUANT_ASSIGN_OR_RETURN(TaskItem item,
                           ParseTaskLine(lines[i], line, limits));
    if (!item.id.empty()) {
      const auto [it, inserted] = id_lines.emplace(item.id, line);
      if (!inserted) {
        return LineError(
            line, absl::StrCat("\"id\" \"", item.id,
                               "\" repeats the one on line ", it->second));
      }
    }
    file.items.push_back(std::move(item));
  }
  if (file.items.empty()) {
    return absl::InvalidArgumentError("task file is empty: no task");
  }
  return file;
}

absl::StatusOr<TaskFile> LoadTaskFile(const std::string& path,
                                      const TaskFileLimits& limits,
                                      FileSystem* fs) {
  QUANT_ASSIGN_OR_RETURN(std::string bytes,
                         fs->ReadFile(path, limits.max_bytes));
  absl::StatusOr<TaskFile> file = ParseTaskFile(bytes, limits);
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat(path, ": ", file.status().message()));
  }
  return file;
}

}  // namespace quant
