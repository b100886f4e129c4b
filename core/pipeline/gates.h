// The end-to-end release gates: the quantized model against the unquantized
// one on the held-out windows, compared with the recipe's thresholds, which
// were fixed before the run.
#ifndef QUANT_CORE_PIPELINE_GATES_H_
#define QUANT_CORE_PIPELINE_GATES_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/file_system.h"
#include "core/calib/calibration_split.h"
#include "core/eval/next_token_metrics.h"
#include "core/eval/streamed_evaluation.h"
#include "core/eval/task_comparison.h"
#include "core/eval/task_file.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/previous_release.h"
#include "core/recipe/recipe.h"
#include "core/runtime/runtime_conformance.h"
#include "core/text/tokenizer.h"
#include "nlohmann/json.hpp"

namespace quant {

struct GateCheck {
  // "max_ppl_ratio", "max_mean_kl", "min_top1_agreement",
  // "max_ppl_ratio_vs_previous", "min_task_accuracy_ratio",
  // "loads_in_vllm", "loads_in_transformers" (value 1 or 0, threshold 1),
  // "max_starved_experts"
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

// The task file of gates.tasks, loaded by whoever opened the job's inputs.
struct TaskGateInput {
  std::string source;  // gates.tasks as the recipe wrote it.
  const TaskFile* file = nullptr;
  // The checkpoint's; the tasks are encoded with it.
  const Tokenizer* tokenizer = nullptr;
  TaskEvaluationOptions options;
};

// gates.tasks scored on the unquantized (reference) and packed (candidate)
// model.
struct TaskGateResult {
  std::string source;
  TaskComparison comparison;
};

struct GateReport {
  NextTokenMetrics metrics;  // Quantized vs unquantized on held-out windows.
  std::optional<PreviousComparison> previous;
  std::optional<TaskGateResult> tasks;
  // The runtime conformance checks of the packed checkpoint (vLLM, then
  // transformers), whether or not gates.runtime gates on one.
  std::vector<RuntimeCheck> runtime;
  std::vector<GateCheck> checks;  // The gates the recipe sets.
  bool passed = true;             // Every check passed (true when none set).
};

// gates.tasks read and parsed (a path or file:/// URI); nullopt when the
// recipe names none. Errors start with "gates.tasks: ".
absl::StatusOr<std::optional<TaskFile>> LoadGateTaskFile(
    const Gates& gates, FileSystem* fs = FileSystem::Default());

// Whether every task of `file` encodes with `tokenizer` and fits `config`'s
// positions (TokenizeTasks), so that a job fails at its start rather than
// in its finalize. Errors start with "gates.tasks: " and name the line.
absl::Status CheckGateTasksFit(const TaskFile& file, const Tokenizer& tokenizer,
                               const ModelConfig& config);

// Evaluates `quantized` against `reference` on `heldout` with
// EvaluateCheckpoints (one block of each in memory at a time) and checks
// `gates`. With `previous`, the previous release is evaluated against
// `reference` on the same windows too (gates.compare_to). With `tasks`,
// the task file is scored on both models, a block at a time as well
// (StreamedLogitsModel), on options.pool.
absl::StatusOr<GateReport> EvaluateGates(
    const Checkpoint& quantized, const Checkpoint& reference,
    const TokenWindows& heldout, const Gates& gates,
    const StreamedEvaluationOptions& options = {},
    const PreviousRelease* previous = nullptr,
    const TaskGateInput* tasks = nullptr);

// EvaluateGates after the held-out evaluation: `scored` holds its metrics
// (EvaluateCheckpointsTogether's, or MergeEvaluationParts'), the packed
// checkpoint's first and the previous release's second when `previous` is
// given; InvalidArgument for another count. The task gate, when `tasks` is
// given, is evaluated here.
absl::StatusOr<GateReport> EvaluateGatesOnScores(
    const std::vector<NextTokenMetrics>& scored, const Checkpoint& quantized,
    const Checkpoint& reference, const Gates& gates,
    const StreamedEvaluationOptions& options = {},
    const PreviousRelease* previous = nullptr,
    const TaskGateInput* tasks = nullptr);

// `metrics` (and `previous`, `tasks` when evaluated) checked against
// `gates`. A max_ppl_ratio_vs_previous gate without a previous release, or
// a min_task_accuracy_ratio gate without task results, fails.
GateReport CheckGates(const NextTokenMetrics& metrics, const Gates& gates,
                      std::optional<PreviousComparison> previous = {},
                      std::optional<TaskGateResult> tasks = {});

// Records `checks` in `report` and, when gates.runtime names one of their
// runtimes, adds its gate ("loads_in_vllm": passes when it would load). A
// gates.runtime without its check fails.
void AddRuntimeChecks(const Gates& gates, std::vector<RuntimeCheck> checks,
                      GateReport* report);

// With gates.max_starved_experts, adds its gate: `starved` of `experts`
// (every mixture-of-experts block's experts; 0 of 0 for a dense model)
// as a fraction, at most the threshold.
void AddStarvedExpertsCheck(const Gates& gates, int64_t starved,
                            int64_t experts, GateReport* report);

// {"perplexity", "reference_perplexity", "ppl_ratio", "mean_kl",
//  "top1_agreement", "tokens", "checks": [...], "verdict": "PASS"|"FAIL"},
// and with a previous release "ppl_ratio_vs_previous" and "previous":
// {"compare_to", "manifest_sha256", "job_id", "verdict", "method",
//  "perplexity", "ppl_ratio", "mean_kl", "top1_agreement"}, and with tasks
// "tasks": TaskComparisonToJson (core/eval/task_results_json.h) plus
// "file": the recipe's gates.tasks, and with runtime checks "runtime":
// [RuntimeCheckToJson (core/runtime/runtime_conformance.h), ...].
nlohmann::json GateReportToJson(const GateReport& report);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_GATES_H_
