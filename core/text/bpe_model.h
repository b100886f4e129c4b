// The BPE model of tokenizer.json ("model": {"type": "BPE"}): vocabulary,
// ranked merges, byte fallback and unknown-token handling, matching the
// Rust tokenizers crate. Encoded words are cached.
#ifndef QUANT_CORE_TEXT_BPE_MODEL_H_
#define QUANT_CORE_TEXT_BPE_MODEL_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/base/mutex.h"
#include "nlohmann/json.hpp"

namespace quant {

class BpeModel {
 public:
  // `config` is the "model" object; `path` names it in errors.
  static absl::StatusOr<std::unique_ptr<BpeModel>> FromJson(
      const nlohmann::json& config, const std::string& path);

  // Appends the ids of one pre-tokenized word (valid UTF-8). Thread-safe.
  void Tokenize(absl::string_view word, std::vector<int32_t>* ids) const;

  std::optional<int32_t> TokenToId(absl::string_view token) const;
  // The token string of `id`, or null when the vocabulary has no such id.
  const std::string* IdToToken(int32_t id) const;
  // Largest id + 1.
  int32_t vocab_size() const {
    return static_cast<int32_t>(id_to_token_.size());
  }

 private:
  struct Merge {
    int32_t rank;
    int32_t merged_id;
  };

  BpeModel() = default;
  absl::Status LoadVocab(const nlohmann::json& vocab, const std::string& path);
  absl::Status LoadMerges(const nlohmann::json& merges,
                          const std::string& path);
  // The uncached BPE of one word.
  std::vector<int32_t> Encode(absl::string_view word) const;
  const Merge* FindMerge(int32_t left, int32_t right) const;

  absl::flat_hash_map<std::string, int32_t> vocab_;
  std::vector<std::string> id_to_token_;
  std::vector<bool> id_present_;
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string continuing_subword_prefix_;
  std::string end_of_word_suffix_;
  // Id of "<0xXX>" for each byte, or -1 where the vocabulary lacks it.
  std::array<int32_t, 256> byte_token_ids_{};

  mutable Mutex cache_mutex_;
  mutable absl::flat_hash_map<std::string, std::vector<int32_t>> cache_
      ABSL_GUARDED_BY(cache_mutex_);
};

}  // namespace quant

#endif  // QUANT_CORE_TEXT_BPE_MODEL_H_
