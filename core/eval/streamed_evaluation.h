// A checkpoint evaluated against a reference checkpoint without loading
// either model whole: the held-out batches go through both models block by
// block (core/forward/streamed_model.h), a chunk of batches at a time so
// that the hidden states held stay under a bound. What the release gates
// run in the finalize task, whose memory is then one block's weights per
// model plus the embeddings and lm_head, not two whole float models.
//
// The metrics equal EvaluateWindows' on the same windows and batch size
// bit for bit: the same batches, in the same order, through the same
// arithmetic.
#ifndef QUANT_CORE_EVAL_STREAMED_EVALUATION_H_
#define QUANT_CORE_EVAL_STREAMED_EVALUATION_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/base/thread_pool.h"
#include "core/calib/calibration_split.h"
#include "core/eval/next_token_metrics.h"
#include "core/model/checkpoint.h"

namespace quant {

struct StreamedEvaluationOptions {
  int batch_windows = 8;  // Windows per forward call, as EvaluateWindows.
  // Bound on the hidden states held at once (both models, all batches of a
  // chunk). A chunk always holds at least one batch. Every chunk reads each
  // block once per model, so a smaller bound means more block reads.
  int64_t max_hidden_bytes = int64_t{256} << 20;
  // Called after each chunk with (windows done, windows in all).
  std::function<void(int, int)> progress;
  // A chunk's batches go through each block side by side on its threads
  // (the numbers do not depend on it). Inline when null. Not owned.
  ThreadPool* pool = nullptr;
};

// Scores `model` against `reference` on `windows` (see EvaluateWindows for
// what is scored). Errors: CheckEvaluationInputs', a checkpoint whose
// weights cannot be read, max_hidden_bytes < 1.
absl::StatusOr<NextTokenMetrics> EvaluateCheckpoints(
    const Checkpoint& model, const Checkpoint& reference,
    const TokenWindows& windows, const StreamedEvaluationOptions& options);

// Scores every one of `models` against `reference` in one pass: the
// reference's forward runs once for all of them (a release compared with
// the previous one scores both). Result i is models[i]'s, equal to
// EvaluateCheckpoints(*models[i], ...) bit for bit. The hidden-state bound
// counts the reference's and every model's. Errors as EvaluateCheckpoints;
// an empty `models` is InvalidArgument.
absl::StatusOr<std::vector<NextTokenMetrics>> EvaluateCheckpointsTogether(
    const std::vector<const Checkpoint*>& models, const Checkpoint& reference,
    const TokenWindows& windows, const StreamedEvaluationOptions& options);

// How many batches PlanEvaluationBatches cuts `windows` into (0 for
// batch_windows < 1).
int64_t CountEvaluationBatches(const TokenWindows& windows, int batch_windows);

// What EvaluateCheckpointsTogether adds up, for batches [first_batch,
// first_batch + batch_count) of PlanEvaluationBatches(windows,
// options.batch_windows) only: each batch's row scores are handed to
// `sink(model index, scores)` in batch order, then row order, model by
// model. A batch's scores do not depend on which other batches run beside
// it, so batch ranges can be scored apart (by different tasks) and their
// scores added in batch order (evaluation_parts.h). Errors as
// EvaluateCheckpointsTogether; a range outside the plan is InvalidArgument.
// options.progress is called after each chunk with the windows behind it.
absl::Status ScoreCheckpointBatches(
    const std::vector<const Checkpoint*>& models, const Checkpoint& reference,
    const TokenWindows& windows, int64_t first_batch, int64_t batch_count,
    const StreamedEvaluationOptions& options,
    absl::FunctionRef<void(size_t, absl::Span<const NextTokenScore>)> sink);

}  // namespace quant

#endif  // QUANT_CORE_EVAL_STREAMED_EVALUATION_H_
