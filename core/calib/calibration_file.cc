// Parsing calibration files (JSONL or blank-line-separated text).
#include "core/calib/calibration_file.h"

#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/base/file_util.h"
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

bool IsBlank(absl::string_view line) {
  return absl::StripAsciiWhitespace(line).empty();
}

absl::StatusOr<CalibrationDocument> ParseJsonLine(absl::string_view text,
                                                  int line) {
  absl::StatusOr<json> parsed = ParseJsonFile(text, "invalid JSON");
  if (!parsed.ok()) {
    // "invalid JSON: not valid JSON: ..." reads badly; keep the problem.
    absl::string_view problem = parsed.status().message();
    absl::ConsumePrefix(&problem, "invalid JSON: not valid JSON: ");
    return LineError(line, absl::StrCat("invalid JSON: ", problem));
  }
  const json value = *std::move(parsed);
  if (!value.is_object()) return LineError(line, "document is not an object");
  CalibrationDocument doc;
  doc.line = line;
  const auto text_it = value.find("text");
  const auto ids_it = value.find("input_ids");
  const auto messages_it = value.find("messages");
  const int kinds = (text_it != value.end()) + (ids_it != value.end()) +
                    (messages_it != value.end());
  if (kinds > 1) {
    return LineError(line,
                     "document has more than one of \"text\", \"input_ids\" "
                     "and \"messages\"");
  }
  if (messages_it != value.end()) {
    // The messages themselves are checked when the chat template renders
    // them (ValidateConversation names the message and field).
    if (!messages_it->is_array() || messages_it->empty()) {
      return LineError(line, "\"messages\" is not a non-empty array");
    }
    doc.conversation = std::string(text);
    return doc;
  }
  if (text_it != value.end()) {
    if (!text_it->is_string()) {
      return LineError(line, "\"text\" is not a string");
    }
    doc.text = text_it->get<std::string>();
    if (IsBlank(doc.text)) return LineError(line, "\"text\" is empty");
    return doc;
  }
  if (ids_it != value.end()) {
    if (!ids_it->is_array() || ids_it->empty()) {
      return LineError(line, "\"input_ids\" is not a non-empty array");
    }
    std::vector<int32_t> ids;
    ids.reserve(ids_it->size());
    for (size_t i = 0; i < ids_it->size(); ++i) {
      const json& id = (*ids_it)[i];
      if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
          id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
        return LineError(line, absl::StrCat("\"input_ids\"[", i,
                                            "] is not a non-negative integer"));
      }
      ids.push_back(static_cast<int32_t>(id.get<int64_t>()));
    }
    doc.input_ids = std::move(ids);
    return doc;
  }
  return LineError(
      line, "document has none of \"text\", \"input_ids\" and \"messages\"");
}

// A paragraph separator: a line with nothing on it (a lone '\r' counts as
// nothing). A line of spaces belongs to its paragraph, as in the data sets
// this format comes from.
bool IsEmptyLine(absl::string_view line) {
  return line.empty() || line == "\r";
}

}  // namespace

absl::StatusOr<CalibrationFile> ParseCalibrationFile(absl::string_view bytes) {
  CalibrationFile file;
  file.sha256 = Sha256Hex(bytes);
  const absl::string_view stripped = absl::StripLeadingAsciiWhitespace(bytes);
  file.format = !stripped.empty() && stripped.front() == '{'
                    ? CalibrationFormat::kJsonl
                    : CalibrationFormat::kPlainText;
  const std::vector<absl::string_view> lines = absl::StrSplit(bytes, '\n');
  if (file.format == CalibrationFormat::kJsonl) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (IsBlank(lines[i])) continue;
      QUANT_ASSIGN_OR_RETURN(CalibrationDocument doc,
                             ParseJsonLine(lines[i], static_cast<int>(i + 1)));
      file.documents.push_back(std::move(doc));
    }
  } else {
    // Paragraphs: runs of non-blank lines, joined with their newlines.
    CalibrationDocument current;
    for (size_t i = 0; i <= lines.size(); ++i) {
      const bool end = i == lines.size() || IsEmptyLine(lines[i]);
      if (!end) {
        absl::string_view line = lines[i];
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (current.text.empty()) {
          current.line = static_cast<int>(i + 1);
        } else {
          current.text += '\n';
        }
        absl::StrAppend(&current.text, line);
      } else if (!current.text.empty()) {
        // A paragraph of whitespace alone is no document.
        if (!IsBlank(current.text))
          file.documents.push_back(std::move(current));
        current = CalibrationDocument();
      }
    }
  }
  if (file.documents.empty()) {
    return absl::InvalidArgumentError(
        "calibration set is empty: no non-blank document");
  }
  return file;
}

absl::StatusOr<CalibrationFile> LoadCalibrationFile(
    const std::string& path, const CalibrationFileLimits& limits,
    FileSystem* fs) {
  QUANT_ASSIGN_OR_RETURN(std::string bytes,
                         fs->ReadFile(path, limits.max_bytes));
  absl::StatusOr<CalibrationFile> file = ParseCalibrationFile(bytes);
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat(path, ": ", file.status().message()));
  }
  return file;
}

}  // namespace quant
