// Added tokens of tokenizer.json ("added_tokens"): special tokens such as
// "<|endoftext|>" and extra tokens, which are cut out of the input before
// normalisation and BPE, as in the Rust tokenizers crate.
#ifndef QUANT_CORE_TEXT_ADDED_VOCABULARY_H_
#define QUANT_CORE_TEXT_ADDED_VOCABULARY_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/text/normalizer.h"
#include "nlohmann/json.hpp"

namespace quant {

struct AddedToken {
  int32_t id = 0;
  std::string content;
  bool special = false;
  // Matched on the normalised text rather than the raw input.
  bool normalized = false;
  // Only matched where not inside a word.
  bool single_word = false;
  // Swallow the whitespace to the left / right of a match.
  bool lstrip = false;
  bool rstrip = false;
};

// A piece of the input after added tokens are cut out: either an added
// token (token_id set) or normalised text for the pre-tokenizer.
struct InputPiece {
  std::string text;
  std::optional<int32_t> token_id;
  // The piece begins the input (no added token before it).
  bool at_text_start = false;
};

class AddedVocabulary {
 public:
  AddedVocabulary() = default;

  // `added_tokens` is the JSON array (or null); `normalizer` may be null and
  // must outlive this object.
  static absl::StatusOr<AddedVocabulary> FromJson(
      const nlohmann::json& added_tokens, const std::string& path,
      const Normalizer* normalizer);

  // Cuts tokens out of `text` (valid UTF-8): tokens with normalized=false
  // from the raw text, then normalises the rest and cuts tokens with
  // normalized=true from it. Empty pieces are left out. An error is the
  // normaliser failing on this text.
  absl::StatusOr<std::vector<InputPiece>> Split(absl::string_view text) const;

  const AddedToken* FindById(int32_t id) const;
  std::optional<int32_t> TokenToId(absl::string_view content) const;
  const std::vector<AddedToken>& tokens() const { return tokens_; }

 private:
  // Leftmost-longest literal matching over a set of tokens.
  struct Matcher {
    // Indices into tokens_, grouped by the first byte of the pattern and
    // sorted longest first.
    absl::flat_hash_map<unsigned char, std::vector<size_t>> by_first_byte;
    // Pattern per token index (content, normalised for normalized tokens).
    absl::flat_hash_map<size_t, std::string> patterns;
  };
  struct Span {
    size_t begin;
    size_t end;
    std::optional<int32_t> token_id;
  };

  void AddToMatcher(Matcher* matcher, size_t index, std::string pattern);
  std::vector<Span> FindTokens(const Matcher& matcher,
                               absl::string_view text) const;

  std::vector<AddedToken> tokens_;
  absl::flat_hash_map<int32_t, size_t> index_by_id_;
  absl::flat_hash_map<std::string, size_t> index_by_content_;
  Matcher raw_matcher_;
  Matcher normalized_matcher_;
  const Normalizer* normalizer_ = nullptr;
};

}  // namespace quant

#endif  // QUANT_CORE_TEXT_ADDED_VOCABULARY_H_
