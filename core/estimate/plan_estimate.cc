// EstimatePlan and its units; see plan_estimate.h.
#include "core/estimate/plan_estimate.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_format.h"
#include "core/base/status_macros.h"
#include "core/pipeline/quantization_plan.h"

namespace quant {

double PredictJobSeconds(const JobWork& work, const WorkRates& rates,
                         Propagation propagation, int workers) {
  double blocks = 0.0;
  for (const TaskWork& block : work.blocks) {
    blocks += PredictSeconds(block, rates);
  }
  if (propagation == Propagation::kIndependent && !work.blocks.empty()) {
    const int side_by_side =
        std::clamp(workers, 1, static_cast<int>(work.blocks.size()));
    blocks /= side_by_side;
  }
  return blocks + PredictSeconds(work.finalize, rates);
}

absl::StatusOr<PlanEstimate> EstimatePlan(const Checkpoint& checkpoint,
                                          const Recipe& recipe,
                                          const WorkRates& rates, int workers) {
  const ModelConfig& config = checkpoint.config();
  QUANT_ASSIGN_OR_RETURN(QuantizationPlan plan,
                         PlanQuantization(config, recipe));
  QUANT_ASSIGN_OR_RETURN(std::vector<SourceTensor> stored,
                         SourceTensorsOf(checkpoint));
  PlanEstimate estimate;
  QUANT_ASSIGN_OR_RETURN(
      estimate.output,
      ComputeOutputSize(stored, config, recipe,
                        PlannedOutputDecisions(config, recipe, plan)));
  estimate.work = EstimateJobWork(config, recipe, plan);
  estimate.blocks = static_cast<int>(plan.blocks.size());
  estimate.tasks = estimate.blocks + 1;
  estimate.calibration_tokens = estimate.work.calibration_tokens;
  estimate.heldout_tokens = estimate.work.heldout_tokens;
  estimate.workers = workers;
  if (rates.known() && workers > 0) {
    estimate.seconds =
        PredictJobSeconds(estimate.work, rates, recipe.propagation, workers);
  }
  return estimate;
}

std::string HumanBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return absl::StrFormat("%.1f GB", b / 1e9);
  if (b >= 1e6) return absl::StrFormat("%.1f MB", b / 1e6);
  if (b >= 1e3) return absl::StrFormat("%.1f kB", b / 1e3);
  return absl::StrFormat("%d B", bytes);
}

std::string HumanSeconds(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s >= 3600) return absl::StrFormat("%dh%02dm", s / 3600, (s % 3600) / 60);
  if (s >= 60) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (seconds < 10) return absl::StrFormat("%.1fs", seconds);
  return absl::StrFormat("%ds", s);
}

}  // namespace quant
