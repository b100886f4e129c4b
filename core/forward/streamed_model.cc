// Block-by-block forward passes from a checkpoint; see streamed_model.h.
#include "core/forward/streamed_model.h"

#include <utility>

#include "core/base/status_macros.h"
#include "core/forward/block_forward.h"
#include "core/forward/block_weights.h"
#include "core/forward/llama_model.h"

namespace quant {

absl::StatusOr<std::unique_ptr<StreamedModel>> StreamedModel::Open(
    const Checkpoint& checkpoint) {
  std::unique_ptr<StreamedModel> model(
      new StreamedModel(checkpoint, MaxPositions(checkpoint.config())));
  QUANT_ASSIGN_OR_RETURN(model->outer_, LoadOuterWeights(checkpoint));
  return model;
}

absl::StatusOr<std::vector<RowMatrixF>> StreamedModel::FinalHidden(
    const std::vector<TokenBatch>& batches, ThreadPool* pool) const {
  std::vector<RowMatrixF> hidden;
  hidden.reserve(batches.size());
  for (const TokenBatch& batch : batches) {
    QUANT_ASSIGN_OR_RETURN(const std::vector<int32_t> ids,
                           FlattenBatch(batch, rope_.max_positions()));
    QUANT_ASSIGN_OR_RETURN(RowMatrixF rows,
                           EmbedTokens(outer_.embed_tokens, ids));
    hidden.push_back(std::move(rows));
  }
  const ModelConfig& config = checkpoint_.config();
  for (int b = 0; b < config.num_hidden_layers; ++b) {
    QUANT_ASSIGN_OR_RETURN(const BlockWeights block,
                           LoadBlockWeights(checkpoint_, b));
    ParallelFor(pool, static_cast<int64_t>(batches.size()), [&](int64_t i) {
      hidden[i] = RunBlock(config, block, rope_,
                           static_cast<int>(batches[i][0].size()), hidden[i]);
    });
  }
  return hidden;
}

RowMatrixF StreamedModel::Logits(const ConstRowMatrixRef& hidden) const {
  return FinalLogits(outer_, config().rms_norm_eps, hidden);
}

}  // namespace quant
