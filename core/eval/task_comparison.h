// The same tasks on a reference and a candidate model, and the accuracy
// ratios candidate / reference that the gate min_task_accuracy_ratio reads.
//
// Ratio when the reference's accuracy is 0: 1.0, whatever the candidate's.
// A candidate cannot do worse than nothing, so the gate (which asks that
// the candidate keep the reference's accuracy) has nothing to hold it to;
// infinity or NaN would not survive JSON and would compare badly in the
// gate. reference_zero marks those ratios so a report can say so.
//
// The gate passes when every task group's ratio and the overall ratio are
// at least the minimum: a small group that collapses is not hidden by a
// large one that held.
#ifndef QUANT_CORE_EVAL_TASK_COMPARISON_H_
#define QUANT_CORE_EVAL_TASK_COMPARISON_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/eval/logits_model.h"
#include "core/eval/task_evaluation.h"
#include "core/eval/task_file.h"
#include "core/text/tokenizer.h"

namespace quant {

struct TaskAccuracyRatio {
  std::string task;  // A group's name, or "all".
  int count = 0;
  double reference_accuracy = 0;
  double candidate_accuracy = 0;
  double ratio = 1;             // candidate / reference; see above.
  bool reference_zero = false;  // The reference's accuracy is 0.
};

struct TaskComparison {
  TaskEvaluation reference;
  TaskEvaluation candidate;
  std::vector<TaskAccuracyRatio> groups;  // Sorted by name.
  TaskAccuracyRatio overall;
  double min_ratio = 1;  // Of the groups' and the overall ratio.
};

// candidate / reference, or 1 when reference is 0 (see above).
double AccuracyRatio(double reference_accuracy, double candidate_accuracy);

// Pairs two evaluations of the same task file. Errors: files that differ
// (sha256 or tasks).
absl::StatusOr<TaskComparison> CompareTaskEvaluations(TaskEvaluation reference,
                                                      TaskEvaluation candidate);

// Tokenizes `file` once (for the smaller of the two models' positions),
// evaluates it on both models and compares. The models must share the
// tokenizer's vocabulary.
absl::StatusOr<TaskComparison> CompareModelsOnTasks(
    const LogitsModel& reference, const LogitsModel& candidate,
    const Tokenizer& tokenizer, const TaskFile& file,
    const TaskEvaluationOptions& options = {});

// Whether comparison.min_ratio >= min_task_accuracy_ratio.
bool PassesTaskAccuracyGate(const TaskComparison& comparison,
                            double min_task_accuracy_ratio);

}  // namespace quant

#endif  // QUANT_CORE_EVAL_TASK_COMPARISON_H_
