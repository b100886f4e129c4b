// The gates' held-out evaluation cut into parts that run apart and add back
// to exactly the numbers of one evaluation.
//
// The finalize's evaluation (both models over every held-out window) runs
// alone at the end of a job, so on many workers it is the job's tail
// (docs/DATA_PARALLEL.md). A part is a range of the evaluation's batches
// (PlanEvaluationBatches); it keeps every model's NextTokenScore of every
// scored row, not sums, so that parts added in batch order add the same
// doubles in the same order as EvaluateCheckpointsTogether, whatever the
// cut. A part travels between tasks as a small safetensors file (a few
// doubles per held-out token).
#ifndef QUANT_CORE_EVAL_EVALUATION_PARTS_H_
#define QUANT_CORE_EVAL_EVALUATION_PARTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "core/base/file_system.h"
#include "core/calib/calibration_split.h"
#include "core/eval/next_token_metrics.h"
#include "core/eval/streamed_evaluation.h"
#include "core/model/checkpoint.h"

namespace quant {

struct EvaluationPart {
  int64_t first_batch = 0;
  int64_t batch_count = 0;
  int64_t total_batches = 0;  // Of the whole evaluation.
  // scores[model]: that model's scored rows, in row order (rows without a
  // target are left out: they add nothing).
  std::vector<std::vector<NextTokenScore>> scores;
};

// Scores batches [first_batch, first_batch + batch_count) of `models`
// against `reference` (ScoreCheckpointBatches).
absl::StatusOr<EvaluationPart> ScoreEvaluationPart(
    const std::vector<const Checkpoint*>& models, const Checkpoint& reference,
    const TokenWindows& windows, int64_t first_batch, int64_t batch_count,
    const StreamedEvaluationOptions& options);

// Every model's metrics from parts that together cover the evaluation's
// batches once, in any order given: equal bit for bit to
// EvaluateCheckpointsTogether's. InvalidArgument, naming the batches, for
// no parts, parts of different evaluations (total batches or model
// counts), and a gap or an overlap.
absl::StatusOr<std::vector<NextTokenMetrics>> MergeEvaluationParts(
    std::vector<EvaluationPart> parts);

// A part written to and read from `path`. Reading checks the format, the
// range, that every model has its four tensors of one length, and that
// every value is finite (agreement 0 or 1); errors name the file and the
// tensor.
absl::Status WriteEvaluationPart(const std::string& path,
                                 const EvaluationPart& part,
                                 FileSystem* fs = FileSystem::Default());
absl::StatusOr<EvaluationPart> ReadEvaluationPart(
    const std::string& path, FileSystem* fs = FileSystem::Default());

}  // namespace quant

#endif  // QUANT_CORE_EVAL_EVALUATION_PARTS_H_
