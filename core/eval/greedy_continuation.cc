// Greedy decoding for side-by-side continuations.
#include "core/eval/greedy_continuation.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace quant {

absl::StatusOr<std::vector<int32_t>> GreedyContinue(
    const LlamaModel& model, absl::Span<const int32_t> prompt,
    int max_new_tokens, std::optional<int32_t> stop_id) {
  if (prompt.empty()) {
    return absl::InvalidArgumentError("greedy continuation: empty prompt");
  }
  const int64_t limit = model.config().max_position_embeddings;
  if (static_cast<int64_t>(prompt.size()) + max_new_tokens > limit) {
    return absl::InvalidArgumentError(absl::StrCat(
        "greedy continuation: ", prompt.size(), " prompt tokens + ",
        max_new_tokens, " new ones exceed the model's ", limit, " positions"));
  }
  std::vector<int32_t> sequence(prompt.begin(), prompt.end());
  std::vector<int32_t> added;
  for (int step = 0; step < max_new_tokens; ++step) {
    QUANT_ASSIGN_OR_RETURN(const RowMatrixF logits, model.Forward({sequence}));
    Eigen::Index next = 0;
    logits.row(logits.rows() - 1).maxCoeff(&next);
    const int32_t id = static_cast<int32_t>(next);
    sequence.push_back(id);
    added.push_back(id);
    if (stop_id.has_value() && id == *stop_id) break;
  }
  return added;
}

absl::StatusOr<std::vector<ContinuationComparison>> CompareContinuations(
    const LlamaModel& model, const LlamaModel* reference,
    const Tokenizer& tokenizer, const std::vector<std::string>& prompts,
    int max_new_tokens) {
  std::vector<ContinuationComparison> out;
  for (const std::string& prompt : prompts) {
    std::vector<int32_t> ids;
    if (tokenizer.bos_id().has_value()) ids.push_back(*tokenizer.bos_id());
    QUANT_ASSIGN_OR_RETURN(const std::vector<int32_t> text_ids,
                           tokenizer.Encode(prompt, false));
    ids.insert(ids.end(), text_ids.begin(), text_ids.end());
    ContinuationComparison c;
    c.prompt = prompt;
    QUANT_ASSIGN_OR_RETURN(
        c.ids, GreedyContinue(model, ids, max_new_tokens, tokenizer.eos_id()));
    QUANT_ASSIGN_OR_RETURN(c.text, tokenizer.Decode(c.ids, true));
    if (reference != nullptr) {
      QUANT_ASSIGN_OR_RETURN(
          c.reference_ids,
          GreedyContinue(*reference, ids, max_new_tokens, tokenizer.eos_id()));
      QUANT_ASSIGN_OR_RETURN(c.reference_text,
                             tokenizer.Decode(c.reference_ids, true));
      while (c.agreeing_prefix < static_cast<int>(c.ids.size()) &&
             c.agreeing_prefix < static_cast<int>(c.reference_ids.size()) &&
             c.ids[c.agreeing_prefix] == c.reference_ids[c.agreeing_prefix]) {
        ++c.agreeing_prefix;
      }
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace quant
