// Internal to core/pipeline: the selection pass of mixed precision
// (mixed_precision_selection.h, docs/MIXED_PRECISION.md), run once per job
// before any block is quantized, and the file its result is shared through.
//
// The pass runs on the unquantized model's hidden states (independent
// propagation). For each block and each quantized candidate it runs the
// block task with every chosen-for layer at that candidate and the recipe's
// method, and reads each layer's held-out output error from its audit. For
// each setting group it measures a sensitivity: the held-out KL of the
// model with only that group round-to-nearest at its cheapest candidate,
// over that perturbation's output error, on a subset of the held-out
// windows. Then the knapsack chooses.
#ifndef QUANT_CORE_PIPELINE_INTERNAL_MIXED_PRECISION_PASS_H_
#define QUANT_CORE_PIPELINE_INTERNAL_MIXED_PRECISION_PASS_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "core/pipeline/internal/job_inputs.h"
#include "core/pipeline/job_tasks.h"
#include "core/pipeline/mixed_precision_selection.h"

namespace quant {
namespace pipeline_internal {

// The held-out logits the sensitivity probes hold at once (reference
// logits of the probe windows): whole windows up to this, at least one.
inline constexpr int64_t kProbeLogitBytes = int64_t{256} << 20;
// At most this many held-out windows are probed.
inline constexpr int kMaxProbeWindows = 8;

// Measures and solves the selection for the job (`context.recipe` must
// have mixed_precision).
absl::StatusOr<MixedPrecisionSelection> MeasureMixedPrecision(
    const JobTaskContext& context, const JobInputs& inputs,
    const TaskControl& control);

// Where the job's selection is published: <work_dir>/mixed_precision.json.
std::string MixedPrecisionPath(const std::string& work_dir);

// The job's selection: the published one when there is one (checked
// against this job's plan: DataLoss when it does not match), else measured
// here and published (atomically; two tasks that both measure write the
// same bytes).
absl::StatusOr<MixedPrecisionSelection> JobMixedPrecision(
    const JobTaskContext& context, const JobInputs& inputs,
    const TaskControl& control);

// The published selection only: FailedPrecondition when there is none (a
// finalize before any block task ran).
absl::StatusOr<MixedPrecisionSelection> ReadJobMixedPrecision(
    const JobTaskContext& context, const JobInputs& inputs);

}  // namespace pipeline_internal
}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_INTERNAL_MIXED_PRECISION_PASS_H_
