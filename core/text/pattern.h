// The "pattern" field shared by Replace normalisers/decoders and Split
// pre-tokenizers: {"String": "literal"} or {"Regex": "pcre"}.
#ifndef QUANT_CORE_TEXT_PATTERN_H_
#define QUANT_CORE_TEXT_PATTERN_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/regex.h"
#include "nlohmann/json.hpp"

namespace quant {

// Compiles config["pattern"]; a String pattern matches literally.
absl::StatusOr<std::unique_ptr<Regex>> PatternFromJson(
    const nlohmann::json& config, const std::string& path);

// `text` with every match of `pattern` replaced by `content`; an error when
// the pattern gives up on `text` (see Regex::FindAll).
absl::StatusOr<std::string> ReplaceAll(const Regex& pattern,
                                       absl::string_view text,
                                       absl::string_view content);

}  // namespace quant

#endif  // QUANT_CORE_TEXT_PATTERN_H_
