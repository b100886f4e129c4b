// Block-streamed evaluation of a checkpoint against a reference; see
// streamed_evaluation.h.
#include "core/eval/streamed_evaluation.h"

#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/eval/evaluate.h"
#include "core/forward/streamed_model.h"

namespace quant {

absl::StatusOr<NextTokenMetrics> EvaluateCheckpoints(
    const Checkpoint& model, const Checkpoint& reference,
    const TokenWindows& windows, const StreamedEvaluationOptions& options) {
  if (options.max_hidden_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_hidden_bytes must be positive, got ", options.max_hidden_bytes));
  }
  QUANT_RETURN_IF_ERROR(CheckEvaluationInputs(
      windows, options.batch_windows, model.config(), &reference.config()));
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<StreamedModel> quantized,
                         StreamedModel::Open(model));
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<StreamedModel> unquantized,
                         StreamedModel::Open(reference));
  const std::vector<EvaluationBatch> batches =
      PlanEvaluationBatches(windows, options.batch_windows);
  // Both models' hidden states for one batch.
  auto batch_bytes = [&](const EvaluationBatch& batch) {
    const int64_t rows = static_cast<int64_t>(batch.targets.size());
    return rows *
           (model.config().hidden_size + reference.config().hidden_size) *
           static_cast<int64_t>(sizeof(float));
  };

  NextTokenMetricsAccumulator metrics;
  const int total = static_cast<int>(windows.sequences.size());
  int reported = 0;
  for (size_t start = 0; start < batches.size();) {
    size_t end = start;
    int64_t bytes = 0;
    std::vector<TokenBatch> inputs;
    while (end < batches.size() &&
           (end == start ||
            bytes + batch_bytes(batches[end]) <= options.max_hidden_bytes)) {
      bytes += batch_bytes(batches[end]);
      inputs.push_back(batches[end].inputs);
      ++end;
    }
    QUANT_ASSIGN_OR_RETURN(const std::vector<RowMatrixF> reference_hidden,
                           unquantized->FinalHidden(inputs, options.pool));
    QUANT_ASSIGN_OR_RETURN(const std::vector<RowMatrixF> hidden,
                           quantized->FinalHidden(inputs, options.pool));
    // The logits one batch at a time: each is [rows, vocab], too large to
    // hold several of (and a few percent of the work).
    for (size_t i = start; i < end; ++i) {
      const RowMatrixF reference_logits =
          unquantized->Logits(reference_hidden[i - start]);
      const RowMatrixF logits = quantized->Logits(hidden[i - start]);
      QUANT_RETURN_IF_ERROR(
          metrics.Add(reference_logits, logits, batches[i].targets));
    }
    reported = batches[end - 1].windows_done;
    if (options.progress) options.progress(reported, total);
    start = end;
  }
  if (options.progress && reported < total) options.progress(total, total);
  return metrics.Result();
}

}  // namespace quant
