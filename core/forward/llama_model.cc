// A whole Llama-family model in float32 memory.
#include "core/forward/llama_model.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/forward/block_forward.h"

namespace quant {

int64_t MaxPositions(const ModelConfig& config) {
  return std::max<int64_t>(config.max_position_embeddings, 1);
}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(
    const Checkpoint& checkpoint) {
  const ModelConfig& config = checkpoint.config();
  std::unique_ptr<LlamaModel> model(
      new LlamaModel(config, MaxPositions(config)));
  QUANT_ASSIGN_OR_RETURN(model->outer_, LoadOuterWeights(checkpoint));
  model->blocks_.reserve(config.num_hidden_layers);
  for (int b = 0; b < config.num_hidden_layers; ++b) {
    QUANT_ASSIGN_OR_RETURN(BlockWeights block, LoadBlockWeights(checkpoint, b));
    model->blocks_.push_back(std::move(block));
  }
  return model;
}

absl::StatusOr<RowMatrixF> LlamaModel::Embed(
    absl::Span<const int32_t> ids) const {
  return EmbedTokens(outer_.embed_tokens, ids);
}

RowMatrixF LlamaModel::Logits(const ConstRowMatrixRef& hidden) const {
  return FinalLogits(outer_, config_.rms_norm_eps, hidden);
}

absl::StatusOr<std::vector<int32_t>> FlattenBatch(
    const std::vector<std::vector<int32_t>>& batch, int64_t max_positions) {
  if (batch.empty() || batch[0].empty()) {
    return absl::InvalidArgumentError("forward needs at least one token");
  }
  const size_t seq_len = batch[0].size();
  if (seq_len > static_cast<uint64_t>(max_positions)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sequence length ", seq_len, " exceeds ", max_positions, " positions"));
  }
  std::vector<int32_t> ids;
  ids.reserve(batch.size() * seq_len);
  for (const auto& sequence : batch) {
    if (sequence.size() != seq_len) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequences in a batch must have equal length: ", sequence.size(),
          " vs ", seq_len));
    }
    ids.insert(ids.end(), sequence.begin(), sequence.end());
  }
  return ids;
}

absl::StatusOr<RowMatrixF> LlamaModel::Forward(
    const std::vector<std::vector<int32_t>>& batch) const {
  QUANT_ASSIGN_OR_RETURN(const std::vector<int32_t> ids,
                         FlattenBatch(batch, rope_.max_positions()));
  const int seq_len = static_cast<int>(batch[0].size());
  QUANT_ASSIGN_OR_RETURN(RowMatrixF hidden, Embed(ids));
  for (const BlockWeights& block : blocks_) {
    hidden = RunBlock(config_, block, rope_, seq_len, hidden);
  }
  return Logits(hidden);
}

}  // namespace quant
