// The end-to-end release gates: the quantized model against the unquantized
// one on the held-out windows, compared with the recipe's thresholds, which
// were fixed before the run.
#ifndef QUANT_CORE_PIPELINE_GATES_H_
#define QUANT_CORE_PIPELINE_GATES_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/calib/calibration_split.h"
#include "core/eval/next_token_metrics.h"
#include "core/eval/streamed_evaluation.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/previous_release.h"
#include "core/recipe/recipe.h"
#include "nlohmann/json.hpp"

namespace quant {

struct GateCheck {
  // "max_ppl_ratio", "max_mean_kl", "min_top1_agreement",
  // "max_ppl_ratio_vs_previous"
  std::string name;
  double threshold = 0.0;
  double value = 0.0;
  bool passed = false;
};

// The previous release (gates.compare_to) on the same held-out windows.
struct PreviousComparison {
  std::string compare_to;       // As the recipe wrote it.
  std::string manifest_sha256;  // Its manifest's; empty when it has none.
  std::string job_id;           // From its manifest, when it has one.
  std::string verdict;
  std::string method;
  NextTokenMetrics metrics;  // The previous release vs unquantized.
  // This checkpoint's held-out perplexity over the previous release's.
  double ppl_ratio_vs_previous = 0.0;
};

struct GateReport {
  NextTokenMetrics metrics;  // Quantized vs unquantized on held-out windows.
  std::optional<PreviousComparison> previous;
  std::vector<GateCheck> checks;  // The gates the recipe sets.
  bool passed = true;             // Every check passed (true when none set).
};

// Evaluates `quantized` against `reference` on `heldout` with
// EvaluateCheckpoints (one block of each in memory at a time) and checks
// `gates`. With `previous`, the previous release is evaluated against
// `reference` on the same windows too (gates.compare_to).
absl::StatusOr<GateReport> EvaluateGates(
    const Checkpoint& quantized, const Checkpoint& reference,
    const TokenWindows& heldout, const Gates& gates,
    const StreamedEvaluationOptions& options = {},
    const PreviousRelease* previous = nullptr);

// `metrics` (and `previous`, when compared) checked against `gates`. A
// max_ppl_ratio_vs_previous gate without a previous release fails.
GateReport CheckGates(const NextTokenMetrics& metrics, const Gates& gates,
                      std::optional<PreviousComparison> previous = {});

// {"perplexity", "reference_perplexity", "ppl_ratio", "mean_kl",
//  "top1_agreement", "tokens", "checks": [...], "verdict": "PASS"|"FAIL"},
// and with a previous release "ppl_ratio_vs_previous" and "previous":
// {"compare_to", "manifest_sha256", "job_id", "verdict", "method",
//  "perplexity", "ppl_ratio", "mean_kl", "top1_agreement"}.
nlohmann::json GateReportToJson(const GateReport& report);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_GATES_H_
