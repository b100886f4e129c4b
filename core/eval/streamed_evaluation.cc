// Block-streamed evaluation of a checkpoint against a reference; see
// streamed_evaluation.h.
#include "core/eval/streamed_evaluation.h"

#include <algorithm>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/eval/evaluate.h"
#include "core/forward/streamed_model.h"

namespace quant {

namespace {

// Rows of a batch whose logits are computed and scored together: the logits
// of a whole batch, [rows, vocab], are too large to hold several of.
constexpr int64_t kLogitRowTile = 256;

// One batch's logits and next-token scores for the reference and every
// model, row tiles spread over `pool`: at a real vocabulary the logits'
// GEMM and the log-softmaxes are a large part of the gates' work. The tiles
// are fixed and their scores added in row order, so the metrics are the
// same on any thread count.
absl::Status ScoreBatch(
    const StreamedModel& reference,
    const std::vector<std::unique_ptr<StreamedModel>>& models,
    const RowMatrixF& reference_hidden,
    const std::vector<const RowMatrixF*>& hidden,
    absl::Span<const int32_t> targets, ThreadPool* pool,
    absl::FunctionRef<void(size_t, absl::Span<const NextTokenScore>)> sink) {
  const int64_t rows = reference_hidden.rows();
  for (const RowMatrixF* h : hidden) {
    if (h->rows() != rows) {
      return absl::InternalError(
          absl::StrCat("evaluation batch: ", h->rows(),
                       " hidden rows, the reference has ", rows));
    }
  }
  if (static_cast<int64_t>(targets.size()) != rows) {
    return absl::InternalError(absl::StrCat(
        "evaluation batch: ", targets.size(), " targets for ", rows, " rows"));
  }
  const int64_t tiles = (rows + kLogitRowTile - 1) / kLogitRowTile;
  // scores[tile][model]
  std::vector<std::vector<absl::StatusOr<std::vector<NextTokenScore>>>> scores(
      static_cast<size_t>(tiles));
  ParallelFor(pool, tiles, [&](int64_t t) {
    const int64_t first = t * kLogitRowTile;
    const int64_t count = std::min(kLogitRowTile, rows - first);
    const RowMatrixF reference_logits =
        reference.Logits(reference_hidden.middleRows(first, count));
    for (size_t m = 0; m < models.size(); ++m) {
      const RowMatrixF logits =
          models[m]->Logits(hidden[m]->middleRows(first, count));
      scores[t].push_back(ScoreNextTokens(reference_logits, logits,
                                          targets.subspan(first, count)));
    }
  });
  for (const auto& tile : scores) {
    for (const auto& model : tile) QUANT_RETURN_IF_ERROR(model.status());
  }
  for (const auto& tile : scores) {
    for (size_t m = 0; m < models.size(); ++m) sink(m, *tile[m]);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<NextTokenMetrics> EvaluateCheckpoints(
    const Checkpoint& model, const Checkpoint& reference,
    const TokenWindows& windows, const StreamedEvaluationOptions& options) {
  QUANT_ASSIGN_OR_RETURN(
      std::vector<NextTokenMetrics> metrics,
      EvaluateCheckpointsTogether({&model}, reference, windows, options));
  return std::move(metrics.front());
}

absl::StatusOr<std::vector<NextTokenMetrics>> EvaluateCheckpointsTogether(
    const std::vector<const Checkpoint*>& models, const Checkpoint& reference,
    const TokenWindows& windows, const StreamedEvaluationOptions& options) {
  std::vector<NextTokenMetricsAccumulator> metrics(models.size());
  QUANT_RETURN_IF_ERROR(ScoreCheckpointBatches(
      models, reference, windows, 0,
      CountEvaluationBatches(windows, options.batch_windows), options,
      [&](size_t model, absl::Span<const NextTokenScore> scores) {
        metrics[model].AddScores(scores);
      }));
  std::vector<NextTokenMetrics> results;
  for (NextTokenMetricsAccumulator& accumulator : metrics) {
    results.push_back(accumulator.Result());
  }
  return results;
}

int64_t CountEvaluationBatches(const TokenWindows& windows, int batch_windows) {
  if (batch_windows < 1) return 0;
  int64_t scorable = 0;
  for (const int length : windows.lengths) scorable += length >= 2 ? 1 : 0;
  return (scorable + batch_windows - 1) / batch_windows;
}

absl::Status ScoreCheckpointBatches(
    const std::vector<const Checkpoint*>& models, const Checkpoint& reference,
    const TokenWindows& windows, int64_t first_batch, int64_t batch_count,
    const StreamedEvaluationOptions& options,
    absl::FunctionRef<void(size_t, absl::Span<const NextTokenScore>)> sink) {
  if (models.empty()) {
    return absl::InvalidArgumentError("no checkpoint to evaluate");
  }
  if (options.max_hidden_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_hidden_bytes must be positive, got ", options.max_hidden_bytes));
  }
  int64_t hidden_widths = reference.config().hidden_size;
  std::vector<std::unique_ptr<StreamedModel>> streamed;
  for (const Checkpoint* model : models) {
    QUANT_RETURN_IF_ERROR(CheckEvaluationInputs(
        windows, options.batch_windows, model->config(), &reference.config()));
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<StreamedModel> opened,
                           StreamedModel::Open(*model));
    streamed.push_back(std::move(opened));
    hidden_widths += model->config().hidden_size;
  }
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<StreamedModel> unquantized,
                         StreamedModel::Open(reference));
  std::vector<EvaluationBatch> batches =
      PlanEvaluationBatches(windows, options.batch_windows);
  const int64_t planned = static_cast<int64_t>(batches.size());
  if (first_batch < 0 || batch_count < 0 ||
      first_batch + batch_count > planned) {
    return absl::InvalidArgumentError(absl::StrCat(
        "evaluation batches [", first_batch, ", ", first_batch + batch_count,
        ") asked of ", planned, " batches"));
  }
  batches.erase(batches.begin() + first_batch + batch_count, batches.end());
  batches.erase(batches.begin(), batches.begin() + first_batch);
  // Every model's hidden states for one batch.
  auto batch_bytes = [&](const EvaluationBatch& batch) {
    const int64_t rows = static_cast<int64_t>(batch.targets.size());
    return rows * hidden_widths * static_cast<int64_t>(sizeof(float));
  };

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
    std::vector<std::vector<RowMatrixF>> hidden;
    for (const std::unique_ptr<StreamedModel>& model : streamed) {
      QUANT_ASSIGN_OR_RETURN(std::vector<RowMatrixF> model_hidden,
                             model->FinalHidden(inputs, options.pool));
      hidden.push_back(std::move(model_hidden));
    }
    for (size_t i = start; i < end; ++i) {
      std::vector<const RowMatrixF*> model_hidden;
      for (const std::vector<RowMatrixF>& h : hidden) {
        model_hidden.push_back(&h[i - start]);
      }
      QUANT_RETURN_IF_ERROR(
          ScoreBatch(*unquantized, streamed, reference_hidden[i - start],
                     model_hidden, batches[i].targets, options.pool, sink));
    }
    reported = batches[end - 1].windows_done;
    if (options.progress) options.progress(reported, total);
    start = end;
  }
  if (options.progress && first_batch + batch_count == planned &&
      reported < total) {
    options.progress(total, total);
  }
  return absl::OkStatus();
}

}  // namespace quant
