// A Hugging Face tokenizer loaded from tokenizer.json (+ tokenizer_config.json)
// that gives the same ids as the Hugging Face tokenizers library for BPE
// models of both families in use: SentencePiece style (Llama 2, Mistral,
// stories260K: "▁" prefix and replacement, byte fallback) and byte-level
// (Llama 3, Qwen2/Qwen3: GPT-2 byte mapping with a regex pre-tokenizer).
//
// Encoding runs: invalid UTF-8 repair -> added tokens cut out -> normaliser
// -> pre-tokenizer -> BPE -> post-processor (special tokens such as BOS).
//
// Invalid UTF-8 input: each maximal invalid subsequence is replaced by
// U+FFFD before anything else, which is what the library's bindings see
// (Python str and JS strings cannot hold invalid bytes; Rust's
// from_utf8_lossy and WHATWG TextDecoder repair bytes the same way).
#ifndef QUANT_CORE_TEXT_TOKENIZER_H_
#define QUANT_CORE_TEXT_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "core/base/file_system.h"

namespace quant {

class AddedVocabulary;
class BpeModel;
class Decoder;
class Normalizer;
class PostProcessor;
class PreTokenizer;

class Tokenizer {
 public:
  // Reads dir/tokenizer.json and, when present, dir/tokenizer_config.json,
  // through `fs` (not owned).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFromDirectory(
      const std::string& dir, FileSystem* fs = FileSystem::Default());

  // `tokenizer_config_json` may be empty (no BOS/EOS then). Errors name the
  // file, the JSON path and the problem, e.g. "tokenizer.json:
  // pre_tokenizer.pretokenizers[1]: unsupported pre-tokenizer type 'Foo'".
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(
      absl::string_view tokenizer_json,
      absl::string_view tokenizer_config_json);

  ~Tokenizer();
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;

  // As the library's encode(text, add_special_tokens): added tokens in the
  // text are always recognised; add_special_tokens applies the
  // post-processor (e.g. the BOS of a TemplateProcessing). Thread-safe.
  // An error (ResourceExhausted) is a pattern of tokenizer.json that gave
  // up on this text: the tokens would not be the ones the tokenizer
  // defines, so none are returned.
  absl::StatusOr<std::vector<int32_t>> Encode(absl::string_view text,
                                              bool add_special_tokens) const;

  // As the library's decode(ids, skip_special_tokens): ids that are not in
  // the vocabulary are skipped. Never performs clean_up_tokenization_spaces.
  // Errors as for Encode (a decoder's Replace pattern).
  absl::StatusOr<std::string> Decode(absl::Span<const int32_t> ids,
                                     bool skip_special_tokens) const;

  // Largest id (model or added token) + 1.
  int32_t vocab_size() const { return vocab_size_; }
  // From tokenizer_config.json's bos_token / eos_token.
  std::optional<int32_t> bos_id() const { return bos_id_; }
  std::optional<int32_t> eos_id() const { return eos_id_; }

  // Added tokens first, then the model's vocabulary.
  absl::StatusOr<int32_t> TokenToId(absl::string_view token) const;
  // The token string of an id (an added token's content, or the model's
  // token, e.g. "Ġworld"), or nullopt when the id is unknown.
  std::optional<std::string> IdToToken(int32_t id) const;
  // Whether `id` is an added token marked special.
  bool IsSpecial(int32_t id) const;

 private:
  Tokenizer();
  absl::Status LoadConfig(absl::string_view tokenizer_config_json);

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_tokenizer_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<PostProcessor> post_processor_;
  std::unique_ptr<Decoder> decoder_;
  std::unique_ptr<AddedVocabulary> added_vocabulary_;
  int32_t vocab_size_ = 0;
  std::optional<int32_t> bos_id_;
  std::optional<int32_t> eos_id_;
};

}  // namespace quant

#endif  // QUANT_CORE_TEXT_TOKENIZER_H_
