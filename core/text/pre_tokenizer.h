// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): split normalised text
// into the words that the BPE model encodes one at a time.
#ifndef QUANT_CORE_TEXT_PRE_TOKENIZER_H_
#define QUANT_CORE_TEXT_PRE_TOKENIZER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace quant {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits (and may rewrite) each piece; empty pieces are dropped.
  // `first_at_text_start` says whether pieces[0] begins the whole input (not
  // after an added token), which Metaspace's prepend_scheme "first" needs.
  // An error is a split pattern that gave up on a piece.
  virtual absl::StatusOr<std::vector<std::string>> PreTokenize(
      std::vector<std::string> pieces, bool first_at_text_start) const = 0;
};

// Builds the pre-tokenizer described by `config` (a non-null JSON object).
// Supported types: Sequence, Split (String/Regex pattern, every behavior,
// invert), ByteLevel (add_prefix_space, use_regex), Metaspace.
absl::StatusOr<std::unique_ptr<PreTokenizer>> PreTokenizerFromJson(
    const nlohmann::json& config, const std::string& path);

}  // namespace quant

#endif  // QUANT_CORE_TEXT_PRE_TOKENIZER_H_
