// JSON parsing for untrusted headers and index files: like nlohmann::json's
// parser, but duplicate object keys and absurd nesting are errors (nlohmann
// silently keeps the last duplicate), and the error says where parsing failed.
#ifndef QUANT_CORE_IO_STRICT_JSON_H_
#define QUANT_CORE_IO_STRICT_JSON_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace quant {

struct StrictJsonOptions {
  // Objects and arrays nested deeper than this are rejected, so no later
  // recursive walk of the value can exhaust the stack.
  int max_depth = 64;
};

// Parses `text` as one JSON value. On failure returns InvalidArgument whose
// message starts with `what` (e.g. "header JSON") and names the problem: the
// syntax error and its position, the duplicated key and the object holding
// it, or the nesting depth.
absl::StatusOr<nlohmann::json> ParseJsonStrict(
    absl::string_view text, absl::string_view what,
    const StrictJsonOptions& options = {});

}  // namespace quant

#endif  // QUANT_CORE_IO_STRICT_JSON_H_
