// Release gates on the held-out windows.
#include "core/pipeline/gates.h"

#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/file_uri.h"
#include "core/base/status_macros.h"
#include "core/eval/logits_model.h"
#include "core/eval/streamed_evaluation.h"
#include "core/eval/task_results_json.h"
#include "core/eval/task_tokens.h"
#include "core/forward/streamed_model.h"

namespace quant {

absl::StatusOr<std::optional<TaskFile>> LoadGateTaskFile(const Gates& gates,
                                                         FileSystem* fs) {
  if (gates.tasks.empty()) return std::optional<TaskFile>();
  std::string path = gates.tasks;
  if (absl::StartsWith(path, kFileUriScheme)) {
    QUANT_ASSIGN_OR_RETURN(path, FileUriPath(gates.tasks, "gates.tasks"));
  }
  absl::StatusOr<TaskFile> file = LoadTaskFile(path, {}, fs);
  if (!file.ok()) {
    return absl::Status(file.status().code(),
                        absl::StrCat("gates.tasks: ", file.status().message()));
  }
  return std::optional<TaskFile>(*std::move(file));
}

absl::Status CheckGateTasksFit(const TaskFile& file, const Tokenizer& tokenizer,
                               const ModelConfig& config) {
  absl::StatusOr<std::vector<TokenizedTask>> tokens =
      TokenizeTasks(file, tokenizer, config.max_position_embeddings,
                    TaskEvaluationOptions().extra_generation_tokens);
  if (!tokens.ok()) {
    return absl::Status(
        tokens.status().code(),
        absl::StrCat("gates.tasks: ", tokens.status().message()));
  }
  return absl::OkStatus();
}

absl::StatusOr<GateReport> EvaluateGates(
    const Checkpoint& quantized, const Checkpoint& reference,
    const TokenWindows& heldout, const Gates& gates,
    const StreamedEvaluationOptions& options, const PreviousRelease* previous,
    const TaskGateInput* tasks) {
  // A previous release is scored in the same pass: the reference's forward
  // runs once for both.
  std::vector<const Checkpoint*> models = {&quantized};
  if (previous != nullptr) models.push_back(previous->checkpoint.get());
  QUANT_ASSIGN_OR_RETURN(
      std::vector<NextTokenMetrics> scored,
      EvaluateCheckpointsTogether(models, reference, heldout, options));
  return EvaluateGatesOnScores(scored, quantized, reference, gates, options,
                               previous, tasks);
}

absl::StatusOr<GateReport> EvaluateGatesOnScores(
    const std::vector<NextTokenMetrics>& scored, const Checkpoint& quantized,
    const Checkpoint& reference, const Gates& gates,
    const StreamedEvaluationOptions& options, const PreviousRelease* previous,
    const TaskGateInput* tasks) {
  const size_t expected = previous != nullptr ? 2 : 1;
  if (scored.size() != expected) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the held-out evaluation scored ", scored.size(), " model(s); ",
        expected, " expected (the packed checkpoint",
        previous != nullptr ? " and the previous release)" : ")"));
  }
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
  std::optional<TaskGateResult> task_result;
  if (tasks != nullptr) {
    if (tasks->file == nullptr || tasks->tokenizer == nullptr) {
      return absl::InvalidArgumentError(
          "EvaluateGates: the task gate needs a task file and a tokenizer");
    }
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<StreamedModel> reference_model,
                           StreamedModel::Open(reference));
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<StreamedModel> quantized_model,
                           StreamedModel::Open(quantized));
    const StreamedLogitsModel reference_logits(*reference_model, options.pool);
    const StreamedLogitsModel quantized_logits(*quantized_model, options.pool);
    task_result.emplace();
    task_result->source = tasks->source;
    absl::StatusOr<TaskComparison> compared =
        CompareModelsOnTasks(reference_logits, quantized_logits,
                             *tasks->tokenizer, *tasks->file, tasks->options);
    if (!compared.ok()) {
      return absl::Status(compared.status().code(),
                          absl::StrCat("gates.tasks ", tasks->source, ": ",
                                       compared.status().message()));
    }
    task_result->comparison = *std::move(compared);
  }
  return CheckGates(metrics, gates, std::move(comparison),
                    std::move(task_result));
}

GateReport CheckGates(const NextTokenMetrics& metrics, const Gates& gates,
                      std::optional<PreviousComparison> previous,
                      std::optional<TaskGateResult> tasks) {
  GateReport report;
  report.metrics = metrics;
  report.previous = std::move(previous);
  report.tasks = std::move(tasks);
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
  if (gates.min_task_accuracy_ratio.has_value()) {
    const double ratio = report.tasks.has_value()
                             ? report.tasks->comparison.min_ratio
                             : std::numeric_limits<double>::quiet_NaN();
    check("min_task_accuracy_ratio", *gates.min_task_accuracy_ratio, ratio,
          report.tasks.has_value() &&
              PassesTaskAccuracyGate(report.tasks->comparison,
                                     *gates.min_task_accuracy_ratio));
  }
  return report;
}

void AddRuntimeChecks(const Gates& gates, std::vector<RuntimeCheck> checks,
                      GateReport* report) {
  report->runtime = std::move(checks);
  if (gates.runtime.empty()) return;
  bool loads = false;
  for (const RuntimeCheck& c : report->runtime) {
    if (TargetRuntimeName(c.runtime) == gates.runtime) loads = c.loads();
  }
  report->checks.push_back({absl::StrCat("loads_in_", gates.runtime), 1.0,
                            loads ? 1.0 : 0.0, loads});
  report->passed = report->passed && loads;
}

void AddStarvedExpertsCheck(const Gates& gates, int64_t starved,
                            int64_t experts, GateReport* report) {
  if (!gates.max_starved_experts.has_value()) return;
  const double fraction =
      experts > 0 ? static_cast<double>(starved) / static_cast<double>(experts)
                  : 0.0;
  const bool passed = fraction <= *gates.max_starved_experts;
  report->checks.push_back(
      {"max_starved_experts", *gates.max_starved_experts, fraction, passed});
  report->passed = report->passed && passed;
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
  if (report.tasks.has_value()) {
    nlohmann::json tasks = TaskComparisonToJson(report.tasks->comparison);
    tasks["file"] = report.tasks->source;
    out["tasks"] = std::move(tasks);
  }
  if (!report.runtime.empty()) {
    nlohmann::json runtime = nlohmann::json::array();
    for (const RuntimeCheck& c : report.runtime) {
      runtime.push_back(RuntimeCheckToJson(c));
    }
    out["runtime"] = std::move(runtime);
  }
  return out;
}

}  // namespace quant
