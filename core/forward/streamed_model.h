// A Llama-family model run block by block straight from its checkpoint: the
// embeddings, final norm and lm_head stay in memory, and each block's
// weights are read (dequantized, for a packed checkpoint) when the batches
// reach it and dropped after, so a forward pass holds one block's weights
// at a time instead of the whole model. Same numbers as LlamaModel::Forward
// on the same batches.
#ifndef QUANT_CORE_FORWARD_STREAMED_MODEL_H_
#define QUANT_CORE_FORWARD_STREAMED_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/thread_pool.h"
#include "core/forward/outer_weights.h"
#include "core/forward/rope.h"
#include "core/model/checkpoint.h"
#include "core/quant/matrix_types.h"

namespace quant {

// Equal-length sequences run through one forward call.
using TokenBatch = std::vector<std::vector<int32_t>>;

class StreamedModel {
 public:
  // Reads the outer weights. `checkpoint` must outlive the model.
  static absl::StatusOr<std::unique_ptr<StreamedModel>> Open(
      const Checkpoint& checkpoint);

  const ModelConfig& config() const { return checkpoint_.config(); }

  // The hidden states after the last block for each batch (rows of one
  // sequence contiguous), reading every block once for all the batches,
  // which go through it side by side on `pool` (inline when null; the
  // numbers do not depend on it). Errors: a bad batch (FlattenBatch), an id
  // outside the vocabulary, a block the checkpoint cannot supply.
  absl::StatusOr<std::vector<RowMatrixF>> FinalHidden(
      const std::vector<TokenBatch>& batches, ThreadPool* pool = nullptr) const;

  // Final norm then lm_head: logits [rows, vocab].
  RowMatrixF Logits(const ConstRowMatrixRef& hidden) const;

 private:
  StreamedModel(const Checkpoint& checkpoint, int64_t max_positions)
      : checkpoint_(checkpoint), rope_(checkpoint.config(), max_positions) {}

  const Checkpoint& checkpoint_;
  RopeTable rope_;
  OuterWeights outer_;
};

}  // namespace quant

#endif  // QUANT_CORE_FORWARD_STREAMED_MODEL_H_
