// Reference-versus-candidate task accuracy ratios; see task_comparison.h.
#include "core/eval/task_comparison.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/eval/task_tokens.h"
#include "core/forward/llama_model.h"

namespace quant {
namespace {

TaskAccuracyRatio Ratio(const TaskGroupResult& reference,
                        const TaskGroupResult& candidate) {
  TaskAccuracyRatio ratio;
  ratio.task = reference.task;
  ratio.count = reference.count;
  ratio.reference_accuracy = reference.accuracy;
  ratio.candidate_accuracy = candidate.accuracy;
  ratio.ratio = AccuracyRatio(reference.accuracy, candidate.accuracy);
  ratio.reference_zero = reference.accuracy == 0;
  return ratio;
}

}  // namespace

double AccuracyRatio(double reference_accuracy, double candidate_accuracy) {
  if (reference_accuracy == 0) return 1;
  return candidate_accuracy / reference_accuracy;
}

absl::StatusOr<TaskComparison> CompareTaskEvaluations(
    TaskEvaluation reference, TaskEvaluation candidate) {
  if (reference.file_sha256 != candidate.file_sha256 ||
      reference.items.size() != candidate.items.size() ||
      reference.groups.size() != candidate.groups.size()) {
    return absl::InvalidArgumentError(
        "task comparison: the reference and the candidate were evaluated on "
        "different task files");
  }
  TaskComparison comparison;
  for (size_t g = 0; g < reference.groups.size(); ++g) {
    if (reference.groups[g].task != candidate.groups[g].task ||
        reference.groups[g].count != candidate.groups[g].count) {
      return absl::InvalidArgumentError(absl::StrCat(
          "task comparison: task group \"", reference.groups[g].task,
          "\" differs between the reference and the candidate"));
    }
    comparison.groups.push_back(
        Ratio(reference.groups[g], candidate.groups[g]));
  }
  comparison.overall = Ratio(reference.overall, candidate.overall);
  comparison.min_ratio = comparison.overall.ratio;
  for (const TaskAccuracyRatio& group : comparison.groups) {
    comparison.min_ratio = std::min(comparison.min_ratio, group.ratio);
  }
  comparison.reference = std::move(reference);
  comparison.candidate = std::move(candidate);
  return comparison;
}

absl::StatusOr<TaskComparison> CompareModelsOnTasks(
    const LogitsModel& reference, const LogitsModel& candidate,
    const Tokenizer& tokenizer, const TaskFile& file,
    const TaskEvaluationOptions& options) {
  if (reference.config().vocab_size != candidate.config().vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "task comparison: the reference's vocab_size ",
        reference.config().vocab_size, " differs from the candidate's ",
        candidate.config().vocab_size));
  }
  const int64_t positions = std::min(MaxPositions(reference.config()),
                                     MaxPositions(candidate.config()));
  QUANT_ASSIGN_OR_RETURN(const std::vector<TokenizedTask> tokens,
                         TokenizeTasks(file, tokenizer, positions,
                                       options.extra_generation_tokens));
  QUANT_ASSIGN_OR_RETURN(
      TaskEvaluation reference_evaluation,
      EvaluateTasks(reference, tokenizer, file, tokens, options));
  QUANT_ASSIGN_OR_RETURN(
      TaskEvaluation candidate_evaluation,
      EvaluateTasks(candidate, tokenizer, file, tokens, options));
  return CompareTaskEvaluations(std::move(reference_evaluation),
                                std::move(candidate_evaluation));
}

bool PassesTaskAccuracyGate(const TaskComparison& comparison,
                            double min_task_accuracy_ratio) {
  return comparison.min_ratio >= min_task_accuracy_ratio;
}

}  // namespace quant
