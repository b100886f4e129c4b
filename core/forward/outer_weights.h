// The weights of a Llama-family model outside its decoder blocks: token
// embeddings, final norm and lm_head, with the two steps that use them
// (embedding ids, and final norm then lm_head to logits). Shared by the
// whole in-memory model and the block-streamed one, so both compute the
// same numbers.
#ifndef QUANT_CORE_FORWARD_OUTER_WEIGHTS_H_
#define QUANT_CORE_FORWARD_OUTER_WEIGHTS_H_

#include <cstdint>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/model/checkpoint.h"
#include "core/quant/matrix_types.h"

namespace quant {

struct OuterWeights {
  RowMatrixF embed_tokens;  // [vocab, hidden]
  RowMatrixF lm_head;       // [vocab, hidden]; empty when tied to embed
  Eigen::VectorXf final_norm;

  const RowMatrixF& output_projection() const {
    return lm_head.size() > 0 ? lm_head : embed_tokens;
  }
};

// Reads them as float32; tied embeddings are held once. Errors name the
// tensor.
absl::StatusOr<OuterWeights> LoadOuterWeights(const Checkpoint& checkpoint);

// Rows of `table` [vocab, hidden] for `ids`; InvalidArgument names an id
// outside the vocabulary.
absl::StatusOr<RowMatrixF> EmbedTokens(const RowMatrixF& table,
                                       absl::Span<const int32_t> ids);

// Final norm then lm_head: logits [rows, vocab].
RowMatrixF FinalLogits(const OuterWeights& weights, double rms_norm_eps,
                       const ConstRowMatrixRef& hidden);

}  // namespace quant

#endif  // QUANT_CORE_FORWARD_OUTER_WEIGHTS_H_
