// Normalisers of tokenizer.json ("normalizer"): text -> text rewrites run on
// each piece of input between added tokens, before pre-tokenisation.
#ifndef QUANT_CORE_TEXT_NORMALIZER_H_
#define QUANT_CORE_TEXT_NORMALIZER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace quant {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  // `text` is valid UTF-8; so is the result. An error (a pattern that gives
  // up on this text) means the text cannot be tokenized as the tokenizer
  // defines it.
  virtual absl::StatusOr<std::string> Normalize(
      absl::string_view text) const = 0;
};

// Builds the normaliser described by `config` (a non-null JSON object).
// Supported types: Sequence, Prepend, Replace (String or Regex pattern),
// NFC, NFD, NFKC, NFKD, Strip. Errors name `path` and the bad field or type.
absl::StatusOr<std::unique_ptr<Normalizer>> NormalizerFromJson(
    const nlohmann::json& config, const std::string& path);

}  // namespace quant

#endif  // QUANT_CORE_TEXT_NORMALIZER_H_
