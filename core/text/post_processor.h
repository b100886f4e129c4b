// Post-processors of tokenizer.json ("post_processor"): add special tokens
// such as BOS around the encoded ids when add_special_tokens is set.
#ifndef QUANT_CORE_TEXT_POST_PROCESSOR_H_
#define QUANT_CORE_TEXT_POST_PROCESSOR_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace quant {

class PostProcessor {
 public:
  virtual ~PostProcessor() = default;
  // The ids of a single sequence with the special tokens added.
  virtual std::vector<int32_t> AddSpecialTokens(
      std::vector<int32_t> ids) const = 0;
};

// Supported types: TemplateProcessing (single template), ByteLevel (ids
// unchanged; it only adjusts offsets), Sequence.
absl::StatusOr<std::unique_ptr<PostProcessor>> PostProcessorFromJson(
    const nlohmann::json& config, const std::string& path);

}  // namespace quant

#endif  // QUANT_CORE_TEXT_POST_PROCESSOR_H_
