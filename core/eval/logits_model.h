// The one thing the task evaluation needs from a model: logits for batches
// of equal-length token sequences. Two implementations: LlamaLogitsModel
// (a whole model in memory, core/forward/llama_model.h) and
// StreamedLogitsModel (a checkpoint run block by block,
// core/forward/streamed_model.h, as the finalize runs the packed model and
// its reference). Both give the same numbers on the same batches.
#ifndef QUANT_CORE_EVAL_LOGITS_MODEL_H_
#define QUANT_CORE_EVAL_LOGITS_MODEL_H_

#include <cstddef>
#include <functional>
#include <vector>

#include "absl/status/status.h"
#include "core/base/thread_pool.h"
#include "core/forward/llama_model.h"
#include "core/forward/streamed_model.h"
#include "core/model/checkpoint.h"
#include "core/quant/matrix_types.h"

namespace quant {

// Receives the logits [batch size * sequence length, vocab] of batch
// `index` (rows of one sequence contiguous); an error stops the pass.
using LogitsVisitor =
    std::function<absl::Status(size_t index, const RowMatrixF& logits)>;

class LogitsModel {
 public:
  virtual ~LogitsModel() = default;

  virtual const ModelConfig& config() const = 0;

  // Runs every batch of `batches` (each a TokenBatch of equal-length
  // sequences) and hands its logits to `visit`, in order, one batch at a
  // time so that only one batch's logits are held. Errors: a bad batch, an
  // id outside the vocabulary, weights that cannot be read, `visit`'s.
  virtual absl::Status Forward(const std::vector<TokenBatch>& batches,
                               const LogitsVisitor& visit) const = 0;
};

class LlamaLogitsModel : public LogitsModel {
 public:
  // `model` is not owned and must outlive this.
  explicit LlamaLogitsModel(const LlamaModel& model) : model_(model) {}

  const ModelConfig& config() const override { return model_.config(); }
  absl::Status Forward(const std::vector<TokenBatch>& batches,
                       const LogitsVisitor& visit) const override;

 private:
  const LlamaModel& model_;
};

class StreamedLogitsModel : public LogitsModel {
 public:
  // Neither is owned; `pool` may be null (inline). Each Forward call reads
  // every block once for all its batches, whose hidden states it holds
  // together: callers bound them by the batches they pass per call.
  explicit StreamedLogitsModel(const StreamedModel& model,
                               ThreadPool* pool = nullptr)
      : model_(model), pool_(pool) {}

  const ModelConfig& config() const override { return model_.config(); }
  absl::Status Forward(const std::vector<TokenBatch>& batches,
                       const LogitsVisitor& visit) const override;

 private:
  const StreamedModel& model_;
  ThreadPool* pool_;
};

}  // namespace quant

#endif  // QUANT_CORE_EVAL_LOGITS_MODEL_H_
