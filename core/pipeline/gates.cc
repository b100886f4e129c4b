// Release gates on the held-out windows.
#include "core/pipeline/gates.h"

#include <limits>
#include <utility>
#include <vector>

#include "core/base/status_macros.h"
#include "core/eval/streamed_evaluation.h"

namespace quant {

absl::StatusOr<GateReport> EvaluateGates(
    const Checkpoint& quantized, const Checkpoint& reference,
    const TokenWindows& heldout, const Gates& gates,
    const StreamedEvaluationOptions& options, const PreviousRelease* previous) {
  // A previous release is scored in the same pass: the reference's forward
  // runs once for both.
  std::vector<const Checkpoint*> models = {&quantized};
  if (previous != nullptr) models.push_back(previous->checkpoint.get());
  QUANT_ASSIGN_OR_RETURN(
      std::vector<NextTokenMetrics> scored,
      EvaluateCheckpointsTogether(models, reference, heldout, options));
  const NextTokenMetrics& metrics = scored.front();
  std::optional<PreviousComparison> comparison;
  if (previous != nullptr) {
    comparison.emplace();
    comparison->compare_to = previous->compare_to;
    comparison->manifest_sha256 = previous->manifest_sha256;
    comparison->job_id = previous->job_id;
    comparison->verdict = previous->verdict;
    comparison->method = previous->method;
    comparison->metrics = scored.back();
    comparison->ppl_ratio_vs_previous =
        metrics.quantized_ppl / comparison->metrics.quantized_ppl;
  }
  return CheckGates(metrics, gates, std::move(comparison));
}

GateReport CheckGates(const NextTokenMetrics& metrics, const Gates& gates,
                      std::optional<PreviousComparison> previous) {
  GateReport report;
  report.metrics = metrics;
  report.previous = std::move(previous);
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
  if (gates.max_ppl_ratio_vs_previous.has_value()) {
    const double ratio = report.previous.has_value()
                             ? report.previous->ppl_ratio_vs_previous
                             : std::numeric_limits<double>::quiet_NaN();
    check("max_ppl_ratio_vs_previous", *gates.max_ppl_ratio_vs_previous, ratio,
          ratio <= *gates.max_ppl_ratio_vs_previous);
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
  nlohmann::json out = {{"perplexity", m.quantized_ppl},
                        {"reference_perplexity", m.reference_ppl},
                        {"ppl_ratio", m.ppl_ratio},
                        {"mean_kl", m.mean_kl},
                        {"top1_agreement", m.top1_agreement},
                        {"tokens", m.tokens},
                        {"checks", std::move(checks)},
                        {"verdict", report.passed ? "PASS" : "FAIL"}};
  if (report.previous.has_value()) {
    const PreviousComparison& p = *report.previous;
    out["ppl_ratio_vs_previous"] = p.ppl_ratio_vs_previous;
    out["previous"] = {{"compare_to", p.compare_to},
                       {"manifest_sha256", p.manifest_sha256},
                       {"job_id", p.job_id},
                       {"verdict", p.verdict},
                       {"method", p.method},
                       {"perplexity", p.metrics.quantized_ppl},
                       {"ppl_ratio", p.metrics.ppl_ratio},
                       {"mean_kl", p.metrics.mean_kl},
                       {"top1_agreement", p.metrics.top1_agreement}};
  }
  return out;
}

}  // namespace quant
