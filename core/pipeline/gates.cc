// Release gates on the held-out windows.
#include "core/pipeline/gates.h"

#include "core/base/status_macros.h"
#include "core/eval/streamed_evaluation.h"

namespace quant {

absl::StatusOr<GateReport> EvaluateGates(
    const Checkpoint& quantized, const Checkpoint& reference,
    const TokenWindows& heldout, const Gates& gates,
    const StreamedEvaluationOptions& options) {
  QUANT_ASSIGN_OR_RETURN(
      const NextTokenMetrics metrics,
      EvaluateCheckpoints(quantized, reference, heldout, options));
  return CheckGates(metrics, gates);
}

GateReport CheckGates(const NextTokenMetrics& metrics, const Gates& gates) {
  GateReport report;
  report.metrics = metrics;
  const NextTokenMetrics& m = report.metrics;
  auto check = [&](const char* name, double threshold, double value,
                   bool passed) {
    report.checks.push_back({name, threshold, value, passed});
    report.passed = report.passed && passed;
  };
  if (gates.max_ppl_ratio.has_value()) {
    check("max_ppl_ratio", *gates.max_ppl_ratio, m.ppl_ratio,
          m.ppl_ratio <= *gates.max_ppl_ratio);
  }
  if (gates.max_mean_kl.has_value()) {
    check("max_mean_kl", *gates.max_mean_kl, m.mean_kl,
          m.mean_kl <= *gates.max_mean_kl);
  }
  if (gates.min_top1_agreement.has_value()) {
    check("min_top1_agreement", *gates.min_top1_agreement, m.top1_agreement,
          m.top1_agreement >= *gates.min_top1_agreement);
  }
  return report;
}

nlohmann::json GateReportToJson(const GateReport& report) {
  nlohmann::json checks = nlohmann::json::array();
  for (const GateCheck& c : report.checks) {
    checks.push_back({{"gate", c.name},
                      {"threshold", c.threshold},
                      {"value", c.value},
                      {"passed", c.passed}});
  }
  const NextTokenMetrics& m = report.metrics;
  return {{"perplexity", m.quantized_ppl},
          {"reference_perplexity", m.reference_ppl},
          {"ppl_ratio", m.ppl_ratio},
          {"mean_kl", m.mean_kl},
          {"top1_agreement", m.top1_agreement},
          {"tokens", m.tokens},
          {"checks", std::move(checks)},
          {"verdict", report.passed ? "PASS" : "FAIL"}};
}

}  // namespace quant
