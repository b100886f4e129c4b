// String/Regex pattern fields and literal replacement.
#include "core/text/pattern.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/json_fields.h"
#include "core/base/status_macros.h"

namespace quant {

absl::StatusOr<std::unique_ptr<Regex>> PatternFromJson(
    const nlohmann::json& config, const std::string& path) {
  const std::string pattern_path = json_fields::FieldPath(path, "pattern");
  auto it = config.find("pattern");
  if (it == config.end() || !it->is_object() || it->size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        pattern_path, ": expected {\"String\": ...} or {\"Regex\": ...}"));
  }
  const std::string kind = it->begin().key();
  const nlohmann::json& value = it->begin().value();
  if (!value.is_string()) {
    return absl::InvalidArgumentError(
        absl::StrCat(pattern_path, ".", kind, ": expected a string"));
  }
  absl::StatusOr<std::unique_ptr<Regex>> regex;
  if (kind == "String") {
    regex = Regex::CompileLiteral(value.get<std::string>());
  } else if (kind == "Regex") {
    regex = Regex::Compile(value.get<std::string>());
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(pattern_path, ": unknown pattern kind '", kind,
                     "' (expected String or Regex)"));
  }
  if (!regex.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(pattern_path, ": ", regex.status().message()));
  }
  return regex;
}

absl::StatusOr<std::string> ReplaceAll(const Regex& pattern,
                                       absl::string_view text,
                                       absl::string_view content) {
  QUANT_ASSIGN_OR_RETURN(const std::vector<Regex::Match> matches,
                         pattern.FindAll(text));
  std::string out;
  size_t previous = 0;
  for (const Regex::Match& match : matches) {
    out.append(text.data() + previous, match.first - previous);
    out.append(content.data(), content.size());
    previous = match.second;
  }
  out.append(text.data() + previous, text.size() - previous);
  return out;
}

}  // namespace quant
