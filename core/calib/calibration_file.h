// Calibration files: what a user uploads. JSONL, one document per line
// ({"text": ...}, {"input_ids": [...]} or a conversation {"messages":
// [...]}), or plain text whose documents are separated by empty lines. A file's
// identity is the sha256 of its bytes (the "calibration hash").
#ifndef QUANT_CORE_CALIB_CALIBRATION_FILE_H_
#define QUANT_CORE_CALIB_CALIBRATION_FILE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/file_system.h"

namespace quant {

struct CalibrationDocument {
  std::string text;                               // Set for text documents.
  std::optional<std::vector<int32_t>> input_ids;  // Set for id documents.
  // Set for conversations ({"messages": [...], "tools": [...]?}): the
  // line's JSON as written, rendered by the recipe's chat template
  // (chat_rendering.h) before it is tokenized.
  std::optional<std::string> conversation;
  int line = 0;  // 1-based line where the document starts.
};

enum class CalibrationFormat { kJsonl, kPlainText };

struct CalibrationFile {
  std::string sha256;
  CalibrationFormat format = CalibrationFormat::kJsonl;
  std::vector<CalibrationDocument> documents;
};

struct CalibrationFileLimits {
  size_t max_bytes = size_t{1} << 30;
};

// Parses file contents. JSONL is recognised by a first non-blank character
// '{'; anything else is plain text. Errors name the line: `line 7: invalid
// JSON (...)`, `line 3: document has neither "text" nor "input_ids"`,
// `line 2: "input_ids"[4] is not a non-negative integer`. An empty set
// (no non-blank document) is an error.
absl::StatusOr<CalibrationFile> ParseCalibrationFile(absl::string_view bytes);

// Reads and parses `path` through `fs`, refusing files over
// `limits.max_bytes`.
absl::StatusOr<CalibrationFile> LoadCalibrationFile(
    const std::string& path, const CalibrationFileLimits& limits = {},
    FileSystem* fs = FileSystem::Default());

}  // namespace quant

#endif  // QUANT_CORE_CALIB_CALIBRATION_FILE_H_
