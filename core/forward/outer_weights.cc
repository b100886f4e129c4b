// Embeddings, final norm and lm_head; see outer_weights.h.
#include "core/forward/outer_weights.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/forward/block_forward.h"
#include "core/forward/block_weights.h"

namespace quant {

absl::StatusOr<OuterWeights> LoadOuterWeights(const Checkpoint& checkpoint) {
  OuterWeights weights;
  QUANT_ASSIGN_OR_RETURN(weights.embed_tokens,
                         ReadMatrix(checkpoint, "model.embed_tokens.weight"));
  if (!checkpoint.config().tie_word_embeddings) {
    QUANT_ASSIGN_OR_RETURN(weights.lm_head,
                           ReadMatrix(checkpoint, "lm_head.weight"));
  }
  QUANT_ASSIGN_OR_RETURN(weights.final_norm,
                         ReadVector(checkpoint, "model.norm.weight"));
  return weights;
}

absl::StatusOr<RowMatrixF> EmbedTokens(const RowMatrixF& table,
                                       absl::Span<const int32_t> ids) {
  RowMatrixF out(static_cast<Eigen::Index>(ids.size()), table.cols());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= table.rows()) {
      return absl::InvalidArgumentError(
          absl::StrCat("token id ", ids[i], " at position ", i,
                       " is outside the vocabulary [0, ", table.rows(), ")"));
    }
    out.row(static_cast<Eigen::Index>(i)) = table.row(ids[i]);
  }
  return out;
}

RowMatrixF FinalLogits(const OuterWeights& weights, double rms_norm_eps,
                       const ConstRowMatrixRef& hidden) {
  const RowMatrixF normed = RmsNorm(hidden, weights.final_norm, rms_norm_eps);
  return normed * weights.output_projection().transpose();
}

}  // namespace quant
