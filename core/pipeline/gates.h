// The end-to-end release gates: the quantized model against the unquantized
// one on the held-out windows, compared with the recipe's thresholds, which
// were fixed before the run.
#ifndef QUANT_CORE_PIPELINE_GATES_H_
#define QUANT_CORE_PIPELINE_GATES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/calib/calibration_split.h"
#include "core/eval/next_token_metrics.h"
#include "core/eval/streamed_evaluation.h"
#include "core/model/checkpoint.h"
#include "core/recipe/recipe.h"
#include "nlohmann/json.hpp"

namespace quant {

struct GateCheck {
  std::string name;  // "max_ppl_ratio", "max_mean_kl", "min_top1_agreement"
  double threshold = 0.0;
  double value = 0.0;
  bool passed = false;
};

struct GateReport {
  NextTokenMetrics metrics;  // Quantized vs unquantized on held-out windows.
  std::vector<GateCheck> checks;  // The gates the recipe sets.
  bool passed = true;             // Every check passed (true when none set).
};

// Evaluates `quantized` against `reference` on `heldout` with
// EvaluateCheckpoints (one block of each in memory at a time) and checks
// `gates`.
absl::StatusOr<GateReport> EvaluateGates(
    const Checkpoint& quantized, const Checkpoint& reference,
    const TokenWindows& heldout, const Gates& gates,
    const StreamedEvaluationOptions& options = {});

// `metrics` checked against `gates`.
GateReport CheckGates(const NextTokenMetrics& metrics, const Gates& gates);

// {"perplexity", "reference_perplexity", "ppl_ratio", "mean_kl",
//  "top1_agreement", "tokens", "checks": [...], "verdict": "PASS"|"FAIL"}.
nlohmann::json GateReportToJson(const GateReport& report);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_GATES_H_
