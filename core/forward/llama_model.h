// A whole Llama-family model in float32 memory: embeddings, every block,
// final norm and lm_head. For evaluation and tests on models that fit in
// memory; the block-by-block pipeline and streamed_model.h hold one block at
// a time instead.
#ifndef QUANT_CORE_FORWARD_LLAMA_MODEL_H_
#define QUANT_CORE_FORWARD_LLAMA_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/forward/block_weights.h"
#include "core/forward/outer_weights.h"
#include "core/forward/rope.h"
#include "core/model/checkpoint.h"
#include "core/quant/matrix_types.h"

namespace quant {

// The ids of `batch` (sequences of equal length, at most `max_positions`)
// one sequence after another; InvalidArgument otherwise.
absl::StatusOr<std::vector<int32_t>> FlattenBatch(
    const std::vector<std::vector<int32_t>>& batch, int64_t max_positions);

// The positions a model of `config` is built for (at least 1).
int64_t MaxPositions(const ModelConfig& config);

class LlamaModel {
 public:
  // Reads every weight of `checkpoint` into float32.
  static absl::StatusOr<std::unique_ptr<LlamaModel>> Load(
      const Checkpoint& checkpoint);

  const ModelConfig& config() const { return config_; }
  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  const BlockWeights& block(int i) const { return blocks_[i]; }
  // For swapping in quantized weights.
  BlockWeights* mutable_block(int i) { return &blocks_[i]; }

  // Embeddings of `ids` as rows; InvalidArgument names an id outside the
  // vocabulary.
  absl::StatusOr<RowMatrixF> Embed(absl::Span<const int32_t> ids) const;

  // Final norm then lm_head: logits [rows, vocab].
  RowMatrixF Logits(const ConstRowMatrixRef& hidden) const;

  // Logits for `batch` sequences of equal length (rows of one sequence
  // contiguous): [batch * seq_len, vocab].
  absl::StatusOr<RowMatrixF> Forward(
      const std::vector<std::vector<int32_t>>& batch) const;

 private:
  LlamaModel(ModelConfig config, int64_t max_positions)
      : config_(std::move(config)), rope_(config_, max_positions) {}

  ModelConfig config_;
  RopeTable rope_;
  OuterWeights outer_;  // Embeddings, final norm, lm_head.
  std::vector<BlockWeights> blocks_;
};

}  // namespace quant

#endif  // QUANT_CORE_FORWARD_LLAMA_MODEL_H_
