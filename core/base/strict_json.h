// JSON parsing for untrusted files: like nlohmann::json's parser, but absurd
// nesting is an error before it costs memory or stack (a tokenizer.json
// nested 20,000 levels once crashed a worker), duplicate object keys are
// errors where the format forbids them (nlohmann silently keeps the last),
// and the error says where parsing failed.
#ifndef QUANT_CORE_IO_STRICT_JSON_H_
#define QUANT_CORE_IO_STRICT_JSON_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace quant {

struct StrictJsonOptions {
  // Objects and arrays nested deeper than this are rejected, so no later
  // recursive walk of the value can exhaust the stack.
  int max_depth = 64;
  // Values of any kind (scalars and containers) in the whole document;
  // 0: unbounded. Refused as they are read, before the document is built.
  int64_t max_values = 0;
  // Headers and index files: a duplicate is an error. config.json and
  // tokenizer files: the last one wins, as Python's json module reads them.
  bool reject_duplicate_keys = true;
};

// The options for files Hugging Face tools write and Python reads (config,
// tokenizer, generation config, calibration lines): last duplicate wins;
// nesting bounded well above any real file (tokenizer.json nests 6 deep).
inline StrictJsonOptions PythonJsonOptions() {
  StrictJsonOptions options;
  options.reject_duplicate_keys = false;
  return options;
}

// Parses `text` as one JSON value. On failure returns InvalidArgument whose
// message starts with `what` (e.g. "header JSON") and names the problem: the
// syntax error and its position, the duplicated key and the object holding
// it, or the nesting depth.
absl::StatusOr<nlohmann::json> ParseJsonStrict(
    absl::string_view text, absl::string_view what,
    const StrictJsonOptions& options = {});

// The same, with the message "<source>: not valid JSON: <problem>" (source:
// a file name, or "line 7" of a JSON-lines file).
absl::StatusOr<nlohmann::json> ParseJsonFile(
    absl::string_view text, absl::string_view source,
    const StrictJsonOptions& options = PythonJsonOptions());

// For readers that check the value's shape themselves and report their own
// error: the parsed value, or a discarded one (is_discarded()) when `text`
// is not valid JSON or breaks `options` (too deep, a refused duplicate).
// Use it instead of nlohmann::json::parse(text, nullptr, false), which has
// no bound on nesting.
nlohmann::json ParseJsonOrDiscarded(
    absl::string_view text,
    const StrictJsonOptions& options = PythonJsonOptions());

}  // namespace quant

#endif  // QUANT_CORE_IO_STRICT_JSON_H_
