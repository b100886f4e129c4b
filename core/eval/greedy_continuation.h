// Greedy continuations of prompts by a model and, side by side, by a
// reference model: the qualitative check a release engineer reads next to
// the gate numbers ("does the quantized model still tell the same story?").
#ifndef QUANT_CORE_EVAL_GREEDY_CONTINUATION_H_
#define QUANT_CORE_EVAL_GREEDY_CONTINUATION_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/forward/llama_model.h"
#include "core/text/tokenizer.h"

namespace quant {

// Appends up to `max_new_tokens` argmax tokens to `prompt` (stopping after
// `stop_id` when given), recomputing the whole sequence each step (no cache:
// for short checks). Errors: an empty prompt, a sequence longer than the
// model's positions, ids outside the vocabulary.
absl::StatusOr<std::vector<int32_t>> GreedyContinue(
    const LlamaModel& model, absl::Span<const int32_t> prompt,
    int max_new_tokens, std::optional<int32_t> stop_id);

struct ContinuationComparison {
  std::string prompt;
  std::vector<int32_t> ids;            // The model's new tokens.
  std::string text;                    // Decoded.
  std::vector<int32_t> reference_ids;  // Empty without a reference.
  std::string reference_text;
  // Leading new tokens on which model and reference agree.
  int agreeing_prefix = 0;
};

// Each prompt is encoded after the tokenizer's BOS; `reference` may be null.
absl::StatusOr<std::vector<ContinuationComparison>> CompareContinuations(
    const LlamaModel& model, const LlamaModel* reference,
    const Tokenizer& tokenizer, const std::vector<std::string>& prompts,
    int max_new_tokens);

}  // namespace quant

#endif  // QUANT_CORE_EVAL_GREEDY_CONTINUATION_H_
