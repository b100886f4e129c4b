// A whole Llama-family model in float32 memory.
#include "core/forward/llama_model.h"

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/forward/block_forward.h"

namespace quant {

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(
    const Checkpoint& checkpoint) {
  const ModelConfig& config = checkpoint.config();
  const int max_positions =
      static_cast<int>(std::max<int64_t>(config.max_position_embeddings, 1));
  std::unique_ptr<LlamaModel> model(new LlamaModel(config, max_positions));
  QUANT_ASSIGN_OR_RETURN(model->embed_tokens_,
                         ReadMatrix(checkpoint, "model.embed_tokens.weight"));
  if (config.tie_word_embeddings) {
    model->lm_head_ = model->embed_tokens_;
  } else {
    QUANT_ASSIGN_OR_RETURN(model->lm_head_,
                           ReadMatrix(checkpoint, "lm_head.weight"));
  }
  QUANT_ASSIGN_OR_RETURN(model->final_norm_,
                         ReadVector(checkpoint, "model.norm.weight"));
  model->blocks_.reserve(config.num_hidden_layers);
  for (int b = 0; b < config.num_hidden_layers; ++b) {
    QUANT_ASSIGN_OR_RETURN(BlockWeights block, LoadBlockWeights(checkpoint, b));
    model->blocks_.push_back(std::move(block));
  }
  return model;
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

absl::StatusOr<RowMatrixF> LlamaModel::Embed(
    absl::Span<const int32_t> ids) const {
  return EmbedTokens(embed_tokens_, ids);
}

RowMatrixF LlamaModel::Logits(const ConstRowMatrixRef& hidden) const {
  const RowMatrixF normed = RmsNorm(hidden, final_norm_, config_.rms_norm_eps);
  return normed * lm_head_.transpose();
}

absl::StatusOr<RowMatrixF> LlamaModel::Forward(
    const std::vector<std::vector<int32_t>>& batch) const {
  if (batch.empty() || batch[0].empty()) {
    return absl::InvalidArgumentError("forward needs at least one token");
  }
  const size_t seq_len = batch[0].size();
  if (seq_len > static_cast<size_t>(rope_.max_positions())) {
    return absl::InvalidArgumentError(
        absl::StrCat("sequence length ", seq_len, " exceeds ",
                     rope_.max_positions(), " positions"));
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
  QUANT_ASSIGN_OR_RETURN(RowMatrixF hidden, Embed(ids));
  for (const BlockWeights& block : blocks_) {
    hidden = RunBlock(config_, block, rope_, static_cast<int>(seq_len), hidden);
  }
  return Logits(hidden);
}

}  // namespace quant
